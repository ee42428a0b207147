"""The bundled end-to-end spill scenario exactly as the docs tell users to run it: the commands
are read from examples/spill/README.md and docs/spill.md and run through the CLI; the run must
admit its work through the four Kueue ClusterQueues, spill the burst to the virtual-kubelet
node and bring it back through the descheduler without breaking the PDB."""

from __future__ import annotations

import csv
import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubeberth.cli.main import app

ROOT = Path(__file__).parents[2]
DOCS = (ROOT / "examples" / "spill" / "README.md", ROOT / "docs" / "spill.md")


def shell_blocks(doc: Path) -> list[str]:
    """The contents of the file's ```sh fenced blocks."""
    blocks: list[str] = []
    fence: str | None = None  # the info string of the block we are in
    lines: list[str] = []
    for line in doc.read_text().splitlines():
        if not line.startswith("```"):
            lines.append(line)
        elif fence is None:
            fence, lines = line[3:].strip(), []
        else:
            if fence in ("sh", "bash"):
                blocks.append("\n".join(lines))
            fence = None
    return blocks


def documented_commands(doc: Path) -> list[list[str]]:
    """Every ``kubeberth simulate`` command of the file's shell blocks that runs the Kueue
    return scenario (continuation lines joined, comments dropped)."""
    out = []
    for block in shell_blocks(doc):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            if not line.startswith("kubeberth simulate"):
                continue
            words = shlex.split(line, comments=True)
            if "examples/spill/kueue.yaml" in words and "--deschedule-policy" in words:
                out.append(words[2:])
    return out


def test_each_doc_documents_the_kueue_return_scenario() -> None:
    for doc in DOCS:
        assert len(documented_commands(doc)) == 1, doc


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_documented_command_admits_spills_and_returns(doc: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    (args,) = documented_commands(doc)
    monkeypatch.chdir(ROOT)
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["simulate", *args, "-o", str(out), "-q"])
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())

    # Admission: serving pods through inference-vk (4 replicas, 10 from the scale-up, 4
    # replacements of evicted VK pods, each its own Workload), the ETL Job through
    # low-priority, borrowing the cohort's quota (6 GPUs for its 4,800 s).
    queues = summary["admission"]["clusterQueues"]
    assert set(queues) == {"training", "inference", "low-priority", "inference-vk"}
    assert queues["inference-vk"]["admitted"] == queues["inference-vk"]["workloads"] == 18
    assert queues["low-priority"]["admitted"] == 1
    assert queues["low-priority"]["borrowedGpuHours"] == pytest.approx(8.0)
    assert all(q["pending"] == 0 for q in queues.values())
    assert summary["admission"]["priorities"]["1000"]["workloads"] == 18

    # Spill: the burst's overflow ran on the VK node, which only the toleration Kueue injects
    # from the virtual-kubelet flavor lets a pod onto.
    spill = summary["spill"]
    assert spill["podsSpilled"] == 4 and spill["gpuHours"] > 0 and spill["cost"] > 0
    pods = {r["pod"]: r for r in csv.DictReader((out / "pods.csv").open())}
    assert sum(1 for r in pods.values() if r["node"] == "virtual-kubelet") == 4

    # Return: the taint came back, the descheduler evicted the four VK pods within the PDB and
    # their replacements (admitted again by Kueue) run in the cluster.
    assert [f["taint"] for f in spill["flips"]] == ["added", "removed", "added", "removed"]
    evictions = list(csv.DictReader((out / "evictions.csv").open()))
    assert len(evictions) == 4
    assert all(r["node"] == "virtual-kubelet" and r["allowed"] == "1" for r in evictions)
    for r in evictions:
        assert pods[r["replacement"]]["node"] in {"gpu-a", "gpu-b"}
    assert summary["evictions"]["refusedByCode"] == {}
    assert spill["podsOnVirtualNodeAtEnd"] == 0


def test_without_kueue_the_labelled_serving_pods_cannot_spill(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    """The serving pods carry no toleration of their own: it comes from Kueue's flavor. Without
    the Kueue objects the burst's overflow waits instead of spilling."""
    (args,) = documented_commands(DOCS[0])
    i = args.index("examples/spill/kueue.yaml")
    args = args[:i - 1] + args[i + 1:]
    monkeypatch.chdir(ROOT)
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["simulate", *args, "-o", str(out), "-q"])
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert "admission" not in summary
    assert summary["spill"]["podsSpilled"] == 0
