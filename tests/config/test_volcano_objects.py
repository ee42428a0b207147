"""Volcano's objects from manifests: a batch.volcano.sh Job expands into the PodGroup and pods
Volcano's job controller creates; bad input names the file, field and expected form."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kubeberth.api.errors import InputError
from kubeberth.config.manifests import load_manifests
from kubeberth.config.volcano import job_uid, load_volcano
from kubeberth.config.yamlsrc import Source
from kubeberth.scheduling.volcano.conf import (
    DEFAULT_CONF,
    load_volcano_conf,
    parse_volcano_conf,
)

# Shaped like Volcano's example/job.yaml: policies, plugins, maxRetry, a named template.
JOB = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: test-job
spec:
  minAvailable: 3
  schedulerName: volcano
  policies:
    - event: PodEvicted
      action: RestartJob
  plugins:
    ssh: []
    env: []
  maxRetry: 5
  queue: default
  tasks:
    - replicas: 6
      name: "default-nginx"
      template:
        metadata:
          name: web
        spec:
          containers:
            - image: nginx
              name: nginx
              resources:
                requests:
                  cpu: "1"
          restartPolicy: OnFailure
"""


def load(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return load_volcano(load_manifests([path]))


def test_a_vcjob_expands_as_volcanos_job_controller_does(tmp_path: Path) -> None:
    vc = load(tmp_path, JOB)
    (job,) = vc.jobs
    uid = job_uid(job)
    pg = vc.pod_groups[f"default/test-job-{uid}"]
    assert pg.spec.min_member == 3
    assert pg.spec.queue == "default"
    assert pg.spec.min_resources == {"cpu": "3000m"}
    assert pg.spec.min_task_member == {"default-nginx": 6}
    assert pg.status.phase == "Pending"
    assert [p.metadata.name for p in vc.job_pods] == [f"test-job-default-nginx-{i}"
                                                      for i in range(6)]
    pod = vc.job_pods[4]
    assert pod.spec.scheduler_name == "volcano"
    assert pod.metadata.annotations["scheduling.k8s.io/group-name"] == f"test-job-{uid}"
    assert pod.metadata.annotations["volcano.sh/task-spec"] == "default-nginx"
    assert pod.metadata.annotations["volcano.sh/task-index"] == "4"
    assert pod.metadata.labels["volcano.sh/job-name"] == "test-job"
    assert pod.metadata.labels["volcano.sh/queue-name"] == "default"
    assert pod.metadata.owner_references[0].kind == "Job"
    assert job.spec.max_retry == 5


def test_webhook_defaults(tmp_path: Path) -> None:
    doc = yaml.safe_load(JOB)
    del doc["spec"]["minAvailable"], doc["spec"]["queue"], doc["spec"]["schedulerName"]
    del doc["spec"]["maxRetry"], doc["spec"]["tasks"][0]["name"]
    vc = load(tmp_path, yaml.safe_dump(doc))
    job = vc.jobs[0]
    assert (job.spec.min_available, job.spec.queue, job.spec.scheduler_name,
            job.spec.max_retry) == (6, "default", "volcano", 3)
    assert vc.job_pods[0].metadata.name == "test-job-default0-0"


def test_the_uid_is_used_in_the_pod_group_name_when_given(tmp_path: Path) -> None:
    doc = yaml.safe_load(JOB)
    doc["metadata"]["uid"] = "1234"
    vc = load(tmp_path, yaml.safe_dump(doc))
    assert "default/test-job-1234" in vc.pod_groups


@pytest.mark.parametrize(("path", "value", "words"), [
    (("spec", "minAvailable"), 9, "spec.minAvailable"),
    (("spec", "tasks"), [], "spec.tasks"),
    (("spec", "policies"), [{"event": "PodEvicted", "action": "Explode"}],
     "spec.policies[0].action"),
])
def test_bad_jobs_name_the_field(tmp_path: Path, path: tuple[str, str], value: object,
                                 words: str) -> None:
    doc = yaml.safe_load(JOB)
    doc[path[0]][path[1]] = value
    with pytest.raises(InputError) as err:
        load(tmp_path, yaml.safe_dump(doc))
    assert words in str(err.value)
    assert "job.yaml" in str(err.value)


def test_a_wrong_job_api_version_lists_both_job_kinds(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(JOB.replace("batch.volcano.sh/v1alpha1", "batch.volcano.sh/v1"))
    with pytest.raises(InputError) as err:
        load_manifests([path])
    assert "batch/v1 or batch.volcano.sh/v1alpha1" in str(err.value)


def test_batch_v1_readers_do_not_see_vcjobs(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(JOB)
    m = load_manifests([path])
    assert m.of_kind("Job") == []
    assert len(m.volcano_jobs()) == 1


def test_default_conf_is_volcanos() -> None:
    conf = parse_volcano_conf(Source("d", DEFAULT_CONF))
    assert conf.actions == ["enqueue", "allocate", "backfill"]
    assert [[p.name for p in t] for t in conf.tiers] == [
        ["priority", "gang", "conformance"],
        ["overcommit", "drf", "predicates", "proportion", "nodeorder"]]
    assert load_volcano_conf(None).actions == conf.actions


@pytest.mark.parametrize(("text", "words"), [
    ('actions: "enqueue, allocate, teleport"\ntiers: [{plugins: [{name: gang}]}]',
     "unknown action 'teleport'"),
    ('actions: "allocate, preempt"\ntiers: [{plugins: [{name: gang}]}]',
     "action 'preempt' is not modelled yet"),
    ('actions: "allocate"\ntiers: [{plugins: [{name: fairy}]}]', "unknown plugin 'fairy'"),
    ('actions: "allocate"\ntiers: [{plugins: [{name: drf, enableJobOrder: "yes"}]}]',
     "enableJobOrder"),
    ('actions: "allocate"\ntiers: [{plugins: [{name: drf, enableJobOrdr: true}]}]',
     "unknown field 'enableJobOrdr'"),
])
def test_bad_confs_name_what_is_wrong(text: str, words: str) -> None:
    with pytest.raises(InputError) as err:
        parse_volcano_conf(Source("volcano-scheduler.conf", text))
    assert words in str(err.value)
    assert "volcano-scheduler.conf" in str(err.value)


def test_conf_from_a_config_map(tmp_path: Path) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "volcano-scheduler-configmap"},
          "data": {"volcano-scheduler.conf": 'actions: "enqueue, allocate"\n'
                                             "tiers:\n- plugins:\n  - name: drf\n"}}
    path = tmp_path / "cm.yaml"
    path.write_text(yaml.safe_dump(cm))
    conf = load_volcano_conf(path)
    assert conf.actions == ["enqueue", "allocate"]
    assert conf.tiers[0][0].name == "drf"
