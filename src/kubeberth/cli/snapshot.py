"""``kubeberth snapshot``: a live cluster's scheduling state as a folder of manifests.

The folder is what ``explain -f``, ``admit -f``, ``simulate --cluster`` and ``whatif -f`` read
(docs/snapshot.md): one file per kind, numbered in load order, and ``config/`` with the
scheduler's and Kueue's configurations when given or found (a subfolder, so a directory load
does not read them as manifests: only some commands read each, and the others refuse it). The
anonymization map is written next to the folder, never inside it, so sharing the folder never
shares the map.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Annotated

import typer
import yaml
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from kubeberth.api.errors import InputError
from kubeberth.cli.common import err_console, user_errors
from kubeberth.scheduling.config.loader import load_scheduler_config

CONFIG_DIR = "config"
SCHEDULER_CONFIG_FILE = "scheduler-config.yaml"
KUEUE_CONFIG_FILE = "kueue-configuration.yaml"


def mapping_path(out_dir: Path) -> Path:
    """Where ``--anonymize`` writes its map by default: beside the folder, not in it."""
    return out_dir.parent / f"{out_dir.name}.mapping.json"


def snapshot_command(
    out_dir: Annotated[Path, typer.Option(
        "--out-dir", help="Folder to write the manifests into (created; files of a previous "
                          "snapshot there are replaced).")],
    kubeconfig: Annotated[Path | None, typer.Option(
        "--kubeconfig", help="kubeconfig of the cluster (default: in-cluster credentials, "
                             "else $KUBECONFIG or ~/.kube/config).")] = None,
    namespace: Annotated[list[str] | None, typer.Option(
        "--namespace", "-n", help="Read namespaced objects of this namespace only "
                                  "(repeatable; pods bound elsewhere are kept: they hold "
                                  "capacity). Default: every namespace.")] = None,
    anonymize: Annotated[bool, typer.Option(
        "--anonymize", help="Replace names and labels consistently, keeping topology and GPU "
                            "labels; write the map to --mapping-file.")] = False,
    mapping_file: Annotated[Path | None, typer.Option(
        "--mapping-file", help="Where --anonymize writes original -> new names, mode 0600 "
                               "(default: OUT_DIR.mapping.json beside the folder).")] = None,
    scheduler_config: Annotated[Path | None, typer.Option(
        "--scheduler-config", help="The scheduler's KubeSchedulerConfiguration, copied into "
                                   "the snapshot (default: looked up in the cluster's "
                                   "ConfigMaps, docs/snapshot.md).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Read a live cluster (nodes, pods and owners, Kueue, priority classes, budgets, gangs,
    DRA, the scheduler's configuration) into manifests the offline commands load."""
    from kubeberth.cli.live_common import connect
    from kubeberth.live.anonymize import Anonymizer
    from kubeberth.live.snapshot import (
        KINDS,
        count,
        files,
        namespaces_flag,
        read_cluster,
    )

    with user_errors():
        scopes = namespaces_flag(namespace)
        config_text, config_from = None, ""
        if scheduler_config is not None:
            load_scheduler_config(scheduler_config)
            config_text, config_from = scheduler_config.read_text(), str(scheduler_config)
        if mapping_file is not None and not anonymize:
            raise InputError("--mapping-file without --anonymize", field="--mapping-file",
                             expected="--anonymize too, or no --mapping-file")
        client = connect(kubeconfig)
        with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                      TextColumn("{task.completed}/{task.total} kinds"), TimeElapsedColumn(),
                      console=err_console, disable=quiet, transient=True) as progress:
            task = progress.add_task("reading", total=len(KINDS) + 1)

            def step(label: str) -> None:
                progress.update(task, description=f"reading {label}", advance=1)

            snap = read_cluster(client, scopes, step, find_config=config_text is None)
        if config_text is None and snap.scheduler_config is not None:
            config_text, config_from = snap.scheduler_config, snap.scheduler_config_from
        mapping: dict[str, dict[str, str]] = {}
        if anonymize:
            anon = Anonymizer()
            for kind in KINDS:
                snap.objects[kind] = [anon.object(o) for o in snap.objects.get(kind) or []]
            if config_text is not None:  # label keys in args (spread constraints, affinity)
                config_text = yaml.safe_dump(anon.selectors(yaml.safe_load(config_text)),
                                             sort_keys=False)
            mapping = anon.mapping
        written = files(snap)
        _write(out_dir, written, {SCHEDULER_CONFIG_FILE: config_text,
                                  KUEUE_CONFIG_FILE: snap.kueue_config})
        if anonymize:
            where = mapping_file or mapping_path(out_dir)
            _write_private(where, json.dumps(mapping, indent=2, sort_keys=True) + "\n")
    out = Console(highlight=False, soft_wrap=True)
    for label in snap.skipped:
        err_console.print(f"note: {label} is not served by this cluster: skipped",
                          highlight=False, soft_wrap=True)
    counts = count(snap)
    shown = ", ".join(f"{n} {label}" for label, n in counts.items())
    out.print(f"wrote {out_dir}/: {shown or 'no objects'}")
    if config_text is not None:
        out.print(f"scheduler configuration from {config_from}: "
                  f"{out_dir}/{CONFIG_DIR}/{SCHEDULER_CONFIG_FILE}")
    else:
        out.print("no scheduler configuration found (the default profile applies; "
                  "--scheduler-config names one)")
    if snap.kueue_config is not None:
        out.print(f"Kueue configuration from {snap.kueue_config_from}: "
                  f"{out_dir}/{CONFIG_DIR}/{KUEUE_CONFIG_FILE} (admit -f and whatif read it)")
    if anonymize:
        out.print(f"anonymization map: {mapping_file or mapping_path(out_dir)} (mode 0600)")


def _write(out_dir: Path, written: dict[str, str], configs: dict[str, str | None]) -> None:
    """The manifests and the configurations found, replacing a previous snapshot's files (and
    only those)."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for old in out_dir.glob("[0-9][0-9]-*.yaml"):
            old.unlink()
        shutil.rmtree(out_dir / CONFIG_DIR, ignore_errors=True)
        for name, text in written.items():
            (out_dir / name).write_text(text)
        for name, config in configs.items():
            if config is not None:
                (out_dir / CONFIG_DIR).mkdir(exist_ok=True)
                (out_dir / CONFIG_DIR / name).write_text(config)
    except OSError as err:
        raise InputError(f"cannot write {out_dir}: {err.strerror}", field="--out-dir",
                         expected="a folder this user can write") from None


def _write_private(path: Path, text: str) -> None:
    """Created 0600 from the start: the map undoes the anonymization."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
    except OSError as err:
        raise InputError(f"cannot write {path}: {err.strerror}", field="--mapping-file",
                         expected="a file path this user can write") from None
