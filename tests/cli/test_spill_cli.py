"""``kubeberth simulate --spill...`` and ``kubeberth spill query`` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.spill_example import EXAMPLE, simulate
from typer.testing import CliRunner

from kubeberth.cli.main import app

runner = CliRunner()


def test_simulate_with_the_example_spill_config(tmp_path: Path) -> None:
    code, output, out = simulate(tmp_path, "--spill-config", str(EXAMPLE / "spill.yaml"))
    assert code == 0, output
    summary = json.loads((out / "summary.json").read_text())
    spill = summary["spill"]
    assert spill["podsSpilled"] == 4 and spill["taintFlips"] == 3
    assert spill["pricePerGpuHour"] == 3.2 and spill["cost"] > 0
    assert (out / "spill.csv").exists() and (out / "spill_metrics.prom").exists()
    assert "spill GPU-hours" in output


def test_flags_override_the_config_and_runs_are_reproducible(tmp_path: Path) -> None:
    args = ("--spill", "--spill-threshold", "100", "--spill-stabilization", "0",
            "--spill-window", "60", "--spill-interval", "30")
    code, output, out = simulate(tmp_path, *args)
    assert code == 0, output
    first = (out / "summary.json").read_text(), (out / "spill.csv").read_text()
    spill = json.loads(first[0])["spill"]
    assert spill["taintFlips"] == 0 and spill["controller"]["threshold"] == 100
    code, _, out = simulate(tmp_path, *args)
    assert ((out / "summary.json").read_text(), (out / "spill.csv").read_text()) == first


def test_without_spill_flags_there_is_no_spill_section(tmp_path: Path) -> None:
    code, output, out = simulate(tmp_path)
    assert code == 0, output
    assert "spill" not in json.loads((out / "summary.json").read_text())


def test_bad_flag_value_is_a_clear_error(tmp_path: Path) -> None:
    code, output, _ = simulate(tmp_path, "--spill-window", "5")
    assert code == 2 and "--spill-window" in output and "Traceback" not in output


def test_bad_spill_config_names_file_line_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "spill.yaml"
    bad.write_text((EXAMPLE / "spill.yaml").read_text().replace("threshold: 4", "threshold: x"))
    code, output, _ = simulate(tmp_path, "--spill-config", str(bad))
    assert code == 2 and "spill.yaml:" in output and "threshold" in output


def test_unknown_field_in_spill_config(tmp_path: Path) -> None:
    bad = tmp_path / "spill.yaml"
    bad.write_text("apiVersion: kubeberth.io/v1alpha1\nkind: SpillConfig\ncontroler: {}\n")
    code, output, _ = simulate(tmp_path, "--spill-config", str(bad))
    assert code == 2 and "controler" in output


def test_spill_query_prints_the_promql() -> None:
    res = runner.invoke(app, ["spill", "query", "--spill-config", str(EXAMPLE / "spill.yaml")])
    assert res.exit_code == 0
    assert res.output.startswith("clamp_min(") and "kube_pod_status_phase" in res.output


def test_spill_query_against_a_down_prometheus_reports_the_fault() -> None:
    res = runner.invoke(app, ["spill", "query", "--prometheus", "http://127.0.0.1:1"])
    assert res.exit_code == 1
    data = json.loads(res.output)
    assert data["value"] is None and data["fault"].startswith("prometheus unreachable")


def test_spill_query_rejects_a_non_url() -> None:
    res = runner.invoke(app, ["spill", "query", "--prometheus", "prometheus:9090"])
    assert res.exit_code == 2 and "http" in res.output


def test_simulate_writes_the_timeline_page(tmp_path: Path) -> None:
    code, output, out = simulate(tmp_path, "--spill-config", str(EXAMPLE / "spill.yaml"))
    assert code == 0, output
    page = (out / "spill.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == 3
    for label in ("free GPUs", "average", "threshold", "low-gpu-usage taint on", "pods on VK",
                  "eviction", "cost"):
        assert label in page
    # Two taint intervals in the example: 300 to 990, and 4080 to the end (bands are the
    # full panel height; the legend swatch is not).
    assert page.count('height="138" fill="#f6d6d6"/>') == 2
    code, _, out2 = simulate(tmp_path / "again", "--spill-config", str(EXAMPLE / "spill.yaml"))
    assert (out2 / "spill.html").read_text() == page


def test_sweep_compares_knobs(tmp_path: Path) -> None:
    res = runner.invoke(app, ["spill", "sweep", "--cluster", str(EXAMPLE / "cluster.yaml"),
                              "-w", str(EXAMPLE / "workload.yaml"),
                              "--spill-config", str(EXAMPLE / "spill.yaml"),
                              "--thresholds", "4", "--windows", "60",
                              "--stabilizations", "0,300,900", "-o", "json"])
    assert res.exit_code == 0, res.output
    runs = json.loads(res.output)["runs"]
    assert [r["stabilizationSeconds"] for r in runs] == [0, 300, 900]
    # Longer stabilization: fewer flips; a medium one makes the overflow wait for the taint.
    flips = [r["taintFlips"] for r in runs]
    assert flips[0] >= flips[1] >= flips[2] and flips[2] < flips[0]
    assert runs[1]["waitP95Seconds"] > runs[0]["waitP95Seconds"]
    assert all(r["podsSpilled"] == 4 for r in runs)


def test_sweep_table_and_bad_values(tmp_path: Path) -> None:
    base = ["spill", "sweep", "--cluster", str(EXAMPLE / "cluster.yaml"),
            "-w", str(EXAMPLE / "workload.yaml")]
    res = runner.invoke(app, [*base, "--stabilizations", "0"])
    assert res.exit_code == 0 and "thrash vs responsiveness" in res.output
    res = runner.invoke(app, [*base, "--stabilizations", "soon"])
    assert res.exit_code == 2 and "--stabilizations" in res.output
    res = runner.invoke(app, [*base, "--windows", "1", "--stabilizations", "0"])
    assert res.exit_code == 2 and "windowSeconds" in res.output


def test_docs_show_the_query_the_command_prints() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "spill.md").read_text()
    block = doc.split("```promql\n", 1)[1].split("```", 1)[0]
    res = runner.invoke(app, ["spill", "query"])
    assert res.exit_code == 0 and res.output == block


def test_docs_example_numbers_match_a_run(tmp_path: Path) -> None:
    code, output, out = simulate(tmp_path, "--spill-config", str(EXAMPLE / "spill.yaml"))
    assert code == 0, output
    spill = json.loads((out / "summary.json").read_text())["spill"]
    doc = (Path(__file__).parents[2] / "docs" / "spill.md").read_text()
    assert [f["time"] for f in spill["flips"]] == [300.0, 990.0, 4080.0]
    assert f"{spill['gpuHours']:.2g} GPU-hours, {spill['cost']:.3g} in cost" in doc
