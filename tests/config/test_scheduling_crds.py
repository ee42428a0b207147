"""PodGroup, ElasticQuota and Volcano Queue manifests: decoding, defaults and located errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubeberth.api.errors import InputError
from kubeberth.config.manifests import load_manifests
from kubeberth.config.scheduling_crds import load_scheduling_crds

OBJECTS = """\
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: late, annotations: {kubeberth.io/arrival-seconds: "12.5"}}
spec: {minMember: 2, scheduleTimeoutSeconds: 30, minResources: {cpu: "4", nvidia.com/gpu: 2}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: vc, namespace: team}
spec: {minMember: 1, queue: research}
---
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: ElasticQuota
metadata: {name: q, namespace: team}
spec: {min: {cpu: "2"}, max: {cpu: "4"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: research}
spec: {weight: 3, capability: {cpu: "8"}, guarantee: {resource: {cpu: "1"}}}
"""


def load(tmp: Path, text: str) -> object:
    f = tmp / "objects.yaml"
    f.write_text(text)
    return load_scheduling_crds(load_manifests([f]))


def test_objects_decode_with_defaults(tmp_path: Path) -> None:
    f = tmp_path / "objects.yaml"
    f.write_text(OBJECTS)
    crds = load_scheduling_crds(load_manifests([f]))
    late, vc = crds.pod_groups
    assert late.group.key == "default/late" and late.created == 12.5 and late.order == 0
    assert late.group.spec.min_member == 2 and late.group.spec.schedule_timeout_seconds == 30
    assert late.group.spec.min_resources == {"cpu": "4", "nvidia.com/gpu": 2}
    assert vc.group.key == "team/vc" and vc.created == 0.0 and vc.group.spec.queue == "research"
    (eq,) = crds.elastic_quotas
    assert eq.metadata.namespace == "team" and eq.spec.max == {"cpu": "4"}
    (q,) = crds.queues
    assert q.spec.weight == 3 and q.spec.guarantee.resource == {"cpu": "1"}


@pytest.mark.parametrize(("text", "field", "message"), [
    ("kind: PodGroup\napiVersion: scheduling.x-k8s.io/v1alpha1\nmetadata: {name: g}\n"
     "spec: {minMember: -2}\n", "spec.minMember", "minMember is negative (-2)"),
    ("kind: PodGroup\napiVersion: scheduling.x-k8s.io/v1alpha1\nmetadata: {name: g}\n"
     "spec: {scheduleTimeoutSeconds: -1}\n", "spec.scheduleTimeoutSeconds", "is negative"),
    ("kind: PodGroup\napiVersion: scheduling.x-k8s.io/v1alpha1\nmetadata: {name: g}\n"
     "spec: {minResources: {cpu: lots}}\n", "spec.minResources.cpu", "lots"),
    ("kind: PodGroup\napiVersion: scheduling.x-k8s.io/v1alpha1\nmetadata: {}\n",
     "metadata.name", "has no name"),
    ("kind: PodGroup\napiVersion: scheduling.x-k8s.io/v1alpha1\nmetadata: {name: g}\n"
     "spec: {minMember: \"3\"}\n", "spec.minMember", "int"),
    ("kind: Queue\napiVersion: scheduling.volcano.sh/v1beta1\nmetadata: {name: q}\n"
     "spec: {weight: 0}\n", "spec.weight", "queue weight is 0"),
    ("kind: ElasticQuota\napiVersion: scheduling.x-k8s.io/v1alpha1\nmetadata: {name: q}\n"
     "spec: {min: {memory: -1Gi}}\n", "spec.min.memory", "negative"),
])
def test_bad_objects_name_file_line_and_field(tmp_path: Path, text: str, field: str,
                                             message: str) -> None:
    with pytest.raises(InputError) as err:
        load(tmp_path, "# leading comment\n" + text)
    text_of = str(err.value)
    assert "objects.yaml:" in text_of and field in text_of and message in text_of


def test_duplicates_are_refused(tmp_path: Path) -> None:
    group = ("apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\n"
             "metadata: {name: g}\nspec: {minMember: 1}\n")
    with pytest.raises(InputError, match="PodGroup default/g is defined twice"):
        load(tmp_path, group + "---\n" + group)
    quota = ("apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: ElasticQuota\n"
             "metadata: {{name: {n}, namespace: a}}\nspec: {{}}\n")
    with pytest.raises(InputError, match="namespace 'a' has a second ElasticQuota"):
        load(tmp_path, quota.format(n="x") + "---\n" + quota.format(n="y"))
