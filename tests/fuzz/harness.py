"""What the input fuzzers share: seed inputs, their mutations and every reader they feed.

Seeds are the project's own examples and a sample of the conformance cases (``../shared``), so
mutations start from realistic manifests and reach deep validation instead of stopping at the
YAML parser. A mutation is a short list of edits (replace a value, insert a token, drop or
repeat a line, cut the text) chosen from :data:`TOKENS`, the values hostile inputs are made of.
The property every reader must keep: it returns, or it raises :class:`InputError`; any other
exception is a crash. ``bench/fuzz.py`` runs the same harness for longer.
"""

from __future__ import annotations

import contextlib
import io
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml
from tests.paths import EXAMPLES, SHARED

from kubeberth.admission.model import load_kueue
from kubeberth.api.errors import InputError
from kubeberth.api.gpu import gpu_demand, node_gpu_count
from kubeberth.api.quantity import MAX_MILLI, Milli, to_milli
from kubeberth.api.resources import (
    node_allocatable,
    pod_non_zero_requests,
    pod_requests,
)
from kubeberth.config.configmaps import load_config_maps
from kubeberth.config.manifests import load_manifests
from kubeberth.config.scheduling_crds import load_scheduling_crds
from kubeberth.config.workloads import load_owners
from kubeberth.descheduling.policy import load_descheduler_policy
from kubeberth.scheduling.config.loader import load_scheduler_config
from kubeberth.sim.traces import read_openb_nodes, read_openb_pods
from kubeberth.spill.config import load_spill_config

TOKENS = (
    "1e999999999", "1e-999999999", ".inf", "-.inf", ".nan", "NaN", "1e400", "1.0e+400",
    "600e400", "18446744073709551616", "9223372036854775807", "-1", "0", "''", "[]", "{}",
    "*a", "&a x", "<<: *a", "\t", ": ", "- ", "---\n", "null", "~", "true", "32Gi", "Explode",
    "Bad_Name", "[[[[[[[[", "}}}", "x" * 300, "\ufeff", "'", '"', "#", "!!binary AAAA",
    "!!python/object:os.system", "? ", "|", ">-", "0x1F", "1_000", "9" * 40, "1.5.5", "e5",
    "1Ki3", "+", ".", "1e", "[/x]", "%YAML 1.1\n", "@", "`", "1e1e1", "1" * 5000,
    "1e9223372036854775808", "-0", "5e-324", "{a: *a}", "&a [*a]",
)
MAX_OPS = 4


@dataclass(frozen=True)
class Edit:
    """One edit: ``op`` at a position (a fraction of the text, in millionths) with a token."""

    op: str
    where: int
    token: str


OPS = ("value", "insert", "drop_line", "repeat_line", "cut")


def mutate(text: str, edits: Sequence[Edit]) -> str:
    for e in edits:
        lines = text.split("\n")
        i = e.where * len(lines) // 1_000_001
        if e.op == "value":
            # Replace what follows the first ": " (or "- ") on that line: mostly keeps the YAML
            # valid, so the edit reaches the typed readers.
            line = lines[i]
            for sep in (": ", "- "):
                at = line.find(sep)
                if at >= 0:
                    lines[i] = line[: at + len(sep)] + e.token
                    break
            else:
                lines[i] = line + e.token
        elif e.op == "insert":
            pos = e.where * len(text) // 1_000_001
            text = text[:pos] + e.token + text[pos:]
            continue
        elif e.op == "drop_line":
            del lines[i]
        elif e.op == "repeat_line":
            lines.insert(i, lines[i])
        else:
            return text[: e.where * len(text) // 1_000_001]
        text = "\n".join(lines)
    return text


@cache
def seeds() -> tuple[tuple[str, str], ...]:
    """(file suffix, text) of every example manifest and one conformance case in eight."""
    out = [(p.suffix, p.read_text()) for p in sorted(EXAMPLES.rglob("*"))
           if p.suffix in (".yaml", ".yml", ".json") and p.is_file()]
    if (SHARED / "conformance").is_dir():
        from tests.conformance import test_kube_scheduler as ks
        from tests.conformance.casefiles import load_cases
        from tests.conformance.kueue_casefiles import case_manifests

        scheduler_cases = [c for c in load_cases("kube-scheduler")
                           if c["extension_point"] != "n/a" and c["plugin"] not in ks.FUNCTIONS]
        for case in scheduler_cases[::8]:
            out.append((".yaml", yaml.safe_dump_all(
                [*ks._manifests(case), ks._config(case)], sort_keys=False)))
        for case in load_cases("kueue")[::8]:
            out.append((".yaml", yaml.safe_dump_all(case_manifests(case), sort_keys=False)))
        from tests.conformance.deschedcases import node_manifest, pod_manifest, policy_document

        for case in load_cases("descheduler")[::8]:
            out.append((".yaml", yaml.safe_dump_all(
                [*map(node_manifest, case["nodes"]), *map(pod_manifest, case["pods"]),
                 policy_document(case)], sort_keys=False)))
    return tuple(out)


def _stages(path: Path) -> Iterator[Callable[[], object]]:
    """Every reader a manifest file can reach, each a separate stage."""

    def manifests() -> None:
        m = load_manifests([path])
        load_kueue(m)
        load_owners(m)
        load_config_maps(m)
        load_scheduling_crds(m)
        for pod in m.pods:
            requests = pod_requests(pod)
            pod_non_zero_requests(pod)
            gpu_demand(pod, requests)
        for node in m.nodes:
            node_gpu_count(node_allocatable(node))

    yield manifests
    text = path.read_text()
    if "KubeSchedulerConfiguration" in text:
        yield lambda: load_scheduler_config(path)
    if "DeschedulerPolicy" in text:
        yield lambda: load_descheduler_policy(path)
    if "SpillConfig" in text:
        yield lambda: load_spill_config(path)


def load_everything(path: Path) -> None:
    """Run every stage; InputError is the only exception a stage may raise."""
    for stage in _stages(path):
        with contextlib.suppress(InputError):
            stage()


# ---- CSV ---------------------------------------------------------------------------------------

NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model"
POD_HEADER = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
              "creation_time,deletion_time,scheduled_time")


def read_csvs(nodes: str, pods: str) -> None:
    """Both openb readers; what they return must be numbers the state can hold."""
    for reader, text in ((read_openb_nodes, nodes), (read_openb_pods, pods)):
        try:
            objects = reader(io.StringIO(text))
        except InputError:
            continue
        for obj in objects:
            if isinstance(obj, tuple):  # a TracePod
                assert obj.arrival >= 0 and (obj.duration is None or obj.duration >= 0)
                obj = obj.pod
                maps = [c.resources.requests for c in obj.spec.containers]
            else:
                maps = [obj.status.allocatable]
            for values in maps:
                for name, value in values.items():
                    assert type(value) is Milli and 0 <= value <= MAX_MILLI
                    assert to_milli(name, value) == value


def random_edits(rng: random.Random) -> list[Edit]:
    return [Edit(rng.choice(OPS), rng.randrange(1_000_001), rng.choice(TOKENS))
            for _ in range(rng.randint(1, MAX_OPS))]


def random_csv_field(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.5:
        return str(rng.choice((0, 1, 250, 1000, 4000, 65536, rng.randrange(10**6))))
    if roll < 0.8:
        return rng.choice(TOKENS).replace(",", ";")
    return "".join(rng.choice("0123456789.e+-, \"\n") for _ in range(rng.randint(0, 30)))
