"""The option block every live command shares: upstream's leader-election names with Go
durations, TLS flags spelled as kube-apiserver spells them, the old spellings kept for one
release as hidden aliases that warn; every bad value exits 2 before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubeberth.cli.main import app

LIVE = ("scheduler", "admission", "spill-controller")


def _invoke(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.stdout, res.stderr


@pytest.mark.parametrize("command", LIVE)
def test_go_durations_are_read_and_bad_ones_name_the_flag(command: str, tmp_path: Path) -> None:
    missing = str(tmp_path / "missing-kubeconfig")
    # A good duration passes: the command gets as far as the kubeconfig.
    code, _, err = _invoke(command, "--kubeconfig", missing, "--leader-elect-lease-duration",
                           "1m30s", "--leader-elect-renew-deadline", "1m",
                           "--leader-elect-retry-period", "500ms")
    assert code == 2 and "--kubeconfig" in err
    code, _, err = _invoke(command, "--kubeconfig", missing, "--leader-elect-lease-duration", "20")
    assert code == 2 and "--kubeconfig" in err  # plain seconds still work
    code, _, err = _invoke(command, "--kubeconfig", missing, "--leader-elect-lease-duration",
                           "soon")
    assert code == 2 and "Traceback" not in err
    assert "field --leader-elect-lease-duration: 'soon' is not a duration" in err
    assert "Go duration such as 30s, 5m" in err


def test_leader_durations_must_nest(tmp_path: Path) -> None:
    base = ("scheduler", "--kubeconfig", str(tmp_path / "none"))
    code, _, err = _invoke(*base, "--leader-elect-lease-duration", "10s",
                           "--leader-elect-renew-deadline", "10s")
    assert code == 2 and "--leader-elect-renew-deadline" in err
    code, _, err = _invoke(*base, "--leader-elect-retry-period", "12s")
    assert code == 2 and "--leader-elect-retry-period" in err
    code, _, err = _invoke(*base, "--leader-elect-lease-duration", "0s")
    assert code == 2 and "--leader-elect-lease-duration" in err


def test_descheduling_interval_is_a_go_duration(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n"
                      "profiles: []\n")
    code, _, err = _invoke("descheduler", "--policy", str(policy), "--descheduling-interval",
                           "5mins")
    assert code == 2 and "field --descheduling-interval: '5mins' is not a duration" in err


def test_a_key_without_a_certificate_is_refused(tmp_path: Path) -> None:
    code, _, err = _invoke("scheduler", "--kubeconfig", str(tmp_path / "none"),
                           "--tls-private-key-file", str(tmp_path / "key.pem"))
    assert code == 2 and "--tls-cert-file" in err


@pytest.mark.parametrize(("old", "new"), [("--tls-cert", "--tls-cert-file"),
                                          ("--tls-key", "--tls-private-key-file")])
def test_the_extenders_old_tls_spellings_warn_and_still_work(old: str, new: str,
                                                             tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.pem")
    args = ["extender", "--port", "0", "--tls-cert-file", missing] if old == "--tls-key" \
        else ["extender", "--port", "0"]
    code, _, err = _invoke(*args, old, missing)
    assert f"warning: {old} is deprecated" in err and new in err
    # The alias reached the server setup: the missing file is what stops it.
    assert code == 2 and "cannot serve on 127.0.0.1:0" in err
    code, _, err = _invoke("extender", "--port", "0", new, missing, old, missing)
    assert code == 2 and f"both {new} and its old spelling {old} are given" in err


def test_old_spellings_are_hidden_from_help() -> None:
    code, out, _ = _invoke("extender", "--help")
    assert code == 0
    assert "--tls-cert-file" in out and "--tls-private-key-file" in out
    assert "--tls-cert " not in out and "--tls-key " not in out


def test_the_live_descheduler_loads_out_of_tree_strategies(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    strategy = Path(__file__).resolve().parents[2] / "examples" / "descheduler-strategy"
    monkeypatch.syspath_prepend(str(strategy))
    base = ("descheduler", "--policy", str(strategy / "policy.yaml"), "--kubeconfig",
            str(tmp_path / "none"), "--once")
    code, _, err = _invoke(*base)
    assert code == 2 and "NodePoolMaxAge" in err  # the policy names a plugin nobody loaded
    code, _, err = _invoke(*base, "--plugin", "nodepoolmaxage:SPEC")
    assert code != 0 and "NodePoolMaxAge" not in err  # validated; only the connection fails
    assert "none" in err
