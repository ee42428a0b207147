"""``kubeberth admit``: run Kueue admission cycles over manifests and print the outcome.

The command is the public face of :mod:`kubeberth.admission`: it reads Kueue objects,
queue-labelled Jobs and Pods, and Workloads (admitted ones carry ``status.admission``), runs
scheduling cycles until nothing changes (or ``--cycles N``), treating every eviction it issues as
observed before the next cycle, and prints the JSON contract documented in docs/admission.md, or
a table. Time does not pass between cycles: ``--now`` fixes the clock.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from kubeberth.admission import AdmissionState, finish_evictions
from kubeberth.admission.check_states import EVICTED_BY_CHECK, is_admitted, required_checks
from kubeberth.admission.checks import BoundCheck, CheckRegistry, in_tree, unmodelled
from kubeberth.admission.driver import MAX_CYCLES, Cycle, settle
from kubeberth.admission.model import AdmissionCheckState, KueueObjects, Workload, load_kueue
from kubeberth.admission.preemption import Target
from kubeberth.api.times import parse_time
from kubeberth.cli.common import (
    OutputFormat,
    print_data,
    read_not_modelled,
    refuse_policies,
    user_errors,
)
from kubeberth.config.manifests import load_manifests


@dataclass(slots=True)
class AdmitRun:
    state: AdmissionState
    preempted: list[dict[str, str]] = field(default_factory=list)
    victims: dict[str, Target] = field(default_factory=dict)
    reasons: dict[str, tuple[str, str]] = field(default_factory=dict)
    cycles: int = 0


def default_now(objs: KueueObjects) -> float:
    """The latest timestamp found in the input (0 when there is none): deterministic."""
    stamps = [0.0]
    for wl in objs.workloads:
        if wl.creation_time > -1e11:
            stamps.append(wl.creation_time)
        if wl.quota_reserved_time is not None:
            stamps.append(wl.quota_reserved_time)
    return max(stamps)


def admit(objs: KueueObjects, now: float, cycles: int | None,
          checks: CheckRegistry | None = None) -> AdmitRun:
    """Cycles until one changes nothing (no admission, no preemption, no workload moved between
    a queue's active and parked sets, no check state changed), or ``cycles`` ran. Every
    eviction issued is observed before the next cycle; after the last one allowed, victims
    still hold their quota. ``checks`` models admission-check controllers (default in-tree)."""

    def observe_evictions(cycle: Cycle, final: bool) -> AdmissionState:
        state = cycle.state
        if cycle.result.preempted and not final:
            return finish_evictions(state, sorted(state.evicting), now)
        return state

    settled = settle(AdmissionState.from_objects(objs, checks), now,
                     max_cycles=MAX_CYCLES if cycles is None else cycles,
                     after=observe_evictions)
    run = AdmitRun(settled.state, cycles=len(settled.cycles))
    for cycle in settled.cycles:
        result = cycle.result
        for na in result.not_admitted:
            run.reasons[na.workload] = (na.reason, na.message)
        for a in result.admitted:
            run.reasons.pop(a.workload.key, None)
        for p in result.preempted:
            run.preempted.append({"workload": p.workload, "by": p.by, "reason": p.reason})
            run.victims[p.workload] = result.state.evicting[p.workload]
        for key, message in cycle.checks.evicted:
            run.reasons[key] = (EVICTED_BY_CHECK, message)
    return run


def _flavors(wl: Workload) -> dict[str, dict[str, str]]:
    if wl.admission is None:
        return {}
    return {psa.name: dict(sorted(psa.flavors.items())) for psa in wl.admission.podset_assignments}


def contract(run: AdmitRun) -> dict[str, Any]:
    """The JSON document printed by ``kubeberth admit -o json``."""
    state = run.state
    rows: dict[str, dict[str, Any]] = {}
    for key, wl in state.admitted.items():
        assert wl.admission is not None
        cq = wl.admission.cluster_queue
        required = required_checks(state.objs.cluster_queues.get(cq), wl.admission)
        if key in state.evicting:
            t = state.evicting[key]
            rows[key] = _row(key, cq, "Preempted", t.reason, _flavors(wl), wl.checks)
        elif required and not (is_admitted(wl.checks) and
                               [c.name for c in wl.checks] == required):
            rows[key] = _row(key, cq, "QuotaReserved", "QuotaReserved", _flavors(wl), wl.checks)
        else:
            rows[key] = _row(key, cq, "Admitted", "Admitted", _flavors(wl), wl.checks)
    for entry, active in state.queues.pending():
        reason, _ = run.reasons.get(entry.key, (entry.reason or "Pending", entry.message))
        st = "Pending" if active else "Inadmissible"
        if entry.cluster_queue in state.inactive:
            st, reason = "Inadmissible", "Inadmissible"
        if entry.key in run.victims:
            st, reason = "Preempted", run.victims[entry.key].reason
        rows[entry.key] = _row(entry.key, entry.cluster_queue, st, reason, {}, entry.wl.checks)
    for key, (wl, reason, _message) in state.queues.unqueued.items():
        rows[key] = _row(key, "", "Inadmissible", reason, {}, wl.checks)
    for key in state.objs.incomplete_groups:
        rows[key] = _row(key, "", "Pending", "WaitingForPods", {})
    out: dict[str, Any] = {"workloads": [rows[k] for k in sorted(rows)],
                           "preempted": run.preempted}
    not_modelled = unmodelled(state.checks)
    if not_modelled:
        out["unmodelledAdmissionChecks"] = [
            {"name": ac.name, "controllerName": ac.controller_name} for ac in not_modelled]
    return out


def messages(run: AdmitRun) -> dict[str, str]:
    """Human-readable detail per workload, for the table."""
    out = {k: m for k, (_, m) in run.reasons.items()}
    for entry, _active in run.state.queues.pending():
        if entry.cluster_queue in run.state.inactive:
            out[entry.key] = run.state.inactive[entry.cluster_queue]
    for key, (_wl, _reason, message) in run.state.queues.unqueued.items():
        out[key] = message
    out.update(run.state.objs.incomplete_groups)
    return out


def _row(name: str, cq: str, st: str, reason: str, flavors: dict[str, dict[str, str]],
         checks: tuple[AdmissionCheckState, ...] = ()) -> dict[str, Any]:
    row: dict[str, Any] = {"name": name, "clusterQueue": cq, "state": st, "reason": reason,
                           "flavors": flavors}
    if checks:
        row["admissionChecks"] = [
            {"name": c.name, "state": c.state, "message": c.message,
             **({"retryCount": c.retry_count} if c.retry_count else {})} for c in checks]
    return row


def unmodelled_notes(checks: Mapping[str, BoundCheck]) -> list[str]:
    """One stderr line per AdmissionCheck whose controller kubeberth does not model."""
    return [f"note: AdmissionCheck {ac.name} (controllerName {ac.controller_name}) is read "
            "and not modelled: its state on each workload is the input's and never changes "
            "(--plugin module:attr loads a check plugin)" for ac in unmodelled(checks)]


def parse_now(value: str | None, objs: KueueObjects) -> float:
    if value is None:
        return default_now(objs)
    return parse_time(value, "--now")


def admit_command(
    filename: Annotated[list[Path], typer.Option(
        "--filename", "-f", help="Manifests: ResourceFlavors, ClusterQueues, Cohorts, "
                                 "LocalQueues, Workloads (admitted ones with status.admission), "
                                 "queue-labelled Jobs and Pods, Kueue Configuration; files, "
                                 "directories or - for stdin (repeatable).")],
    output: Annotated[OutputFormat, typer.Option("--output", "-o")] = OutputFormat.table,
    cycles: Annotated[int | None, typer.Option(
        "--cycles", min=1, help="Stop after N scheduling cycles (default: until a cycle "
                                "changes nothing).")] = None,
    now: Annotated[str | None, typer.Option(
        "--now", help="The clock, RFC 3339 (default: the latest timestamp in the input).")
    ] = None,
    plugin: Annotated[list[str] | None, typer.Option(
        "--plugin", help="Load an out-of-tree admission check plugin, module:attr "
                         "(repeatable).")] = None,
    seed: Annotated[int, typer.Option(
        "--seed", help="Seed of the names given to objects with generateName.")] = 0,
) -> None:
    """Run Kueue admission cycles and print each workload's state, flavors and preemptions."""
    with user_errors():
        registry = in_tree().with_out_of_tree(plugin)
        manifests = load_manifests(filename, seed=seed)
        refuse_policies(manifests, "admit", reads=("Configuration",))
        objs = load_kueue(manifests)
        run = admit(objs, parse_now(now, objs), cycles, registry)
    for note in unmodelled_notes(run.state.checks):
        sys.stderr.write(note + "\n")
    data = contract(run)
    if not_modelled := read_not_modelled(manifests):
        data["readNotModelled"] = not_modelled
    if output != OutputFormat.table:
        print_data(data, output)
        return
    console = Console()
    detail = messages(run)
    table = Table(title=f"Kueue admission after {run.cycles} cycle(s)")
    for col in ("workload", "clusterQueue", "state", "reason", "flavors"):
        table.add_column(col, no_wrap=True)
    table.add_column("message")
    for row in data["workloads"]:
        flavors = "; ".join(f"{ps}: " + ", ".join(f"{r}={f}" for r, f in fl.items())
                            for ps, fl in row["flavors"].items())
        table.add_row(row["name"], row["clusterQueue"], row["state"], row["reason"], flavors,
                      detail.get(row["name"], ""))
    console.print(table)
    if data["preempted"]:
        ptable = Table(title="Preemptions")
        for col in ("workload", "by", "reason"):
            ptable.add_column(col)
        for p in data["preempted"]:
            ptable.add_row(p["workload"], p["by"], p["reason"])
        console.print(ptable)
