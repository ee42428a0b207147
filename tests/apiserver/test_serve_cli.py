"""``kubeberth serve`` as a user runs it: a subprocess, kubectl, TLS, a token, SIGTERM."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from kubeberth.apiserver import EmbeddedServer
from kubeberth.config.manifests import load_manifests


def _start(*args: str, home: Path | None = None) -> tuple[subprocess.Popen[str], list[str]]:
    env = {**os.environ, "HOME": str(home)} if home is not None else None
    proc = subprocess.Popen([sys.executable, "-m", "kubeberth", "serve", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    lines: list[str] = []
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        if line.startswith("kubectl "):
            break
    return proc, lines


def _stop(proc: subprocess.Popen[str]) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=30)


def test_serve_loads_manifests_and_prints_the_kubectl_command(
        cluster_file: Path, tmp_path: Path, kubectl_bin: str) -> None:
    kubeconfig = tmp_path / "kc.yaml"
    proc, lines = _start("-f", str(cluster_file), "--port", "0", "--kubeconfig-out",
                         str(kubeconfig))
    try:
        # Secure by default: HTTPS with a generated token, both only in the 0600 kubeconfig.
        assert lines[0].startswith("kubeberth API server listening on https://127.0.0.1:")
        assert lines[-1] == f"kubectl --kubeconfig {kubeconfig} get nodes"
        assert stat.S_IMODE(kubeconfig.stat().st_mode) == 0o600
        config = yaml.safe_load(kubeconfig.read_text())
        token = config["users"][0]["user"]["token"]
        assert len(token) >= 40 and all(token not in line for line in lines)
        out = subprocess.run([kubectl_bin, "--kubeconfig", str(kubeconfig), "get", "nodes",
                              "-o", "name"], capture_output=True, text=True, timeout=60,
                             env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
        assert out.stdout.split() == ["node/cpu-a", "node/gpu-a", "node/gpu-b"], out.stderr
        url = config["clusters"][0]["cluster"]["server"]
        with httpx.Client(base_url=url, verify=False, timeout=10) as anonymous:
            assert anonymous.get("/api/v1/nodes").status_code == 401
            assert anonymous.get("/metrics").status_code == 401
            assert anonymous.get("/healthz").status_code == 200
    finally:
        assert _stop(proc) == 0


def test_serve_default_kubeconfig_is_under_home(cluster_file: Path, tmp_path: Path) -> None:
    proc, lines = _start("-f", str(cluster_file), "--port", "0", home=tmp_path)
    try:
        kubeconfig = tmp_path / ".kube" / "kubeberth-serve.yaml"
        assert lines[-1] == f"kubectl --kubeconfig {kubeconfig} get nodes"
        assert stat.S_IMODE(kubeconfig.stat().st_mode) == 0o600
    finally:
        assert _stop(proc) == 0


def test_serve_no_auth_prints_the_server_and_warns(cluster_file: Path, tmp_path: Path) -> None:
    proc, lines = _start("-f", str(cluster_file), "--port", "0", "--no-auth",
                         "--metrics-public", home=tmp_path)
    try:
        url = lines[0].split(" on ")[1].split(" ")[0]
        assert url.startswith("http://")
        assert any("--no-auth: no token is required" in line for line in lines)
        assert lines[-1] == f"kubectl --server {url} get nodes"
        assert not (tmp_path / ".kube").exists()
        assert httpx.get(f"{url}/api/v1/nodes").status_code == 200
        assert httpx.get(f"{url}/metrics").status_code == 200
    finally:
        assert _stop(proc) == 0


def test_serve_no_auth_and_token_contradict() -> None:
    proc = subprocess.run([sys.executable, "-m", "kubeberth", "serve", "--no-auth", "--token",
                           "x", "--port", "0"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "--token and --no-auth contradict each other" in proc.stderr


def test_serve_reports_skipped_kinds(tmp_path: Path, cluster_file: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n"
                      "profiles: []\n")
    proc, lines = _start("-f", str(cluster_file), "-f", str(policy), "--port", "0",
                         "--no-auth")
    try:
        assert "not served, skipped: DeschedulerPolicy" in lines
    finally:
        assert _stop(proc) == 0


def test_serve_bad_manifest_exits_2_naming_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
                   "  - name: c\n    resources: {requests: {cpu: lots}}\n")
    proc = subprocess.run([sys.executable, "-m", "kubeberth", "serve", "-f", str(bad),
                           "--port", "0"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert f"{bad}:7: field spec.containers[0].resources.requests.cpu" in \
        " ".join(proc.stderr.split())
    assert "Traceback" not in proc.stderr


def test_serve_busy_port_exits_2() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "kubeberth", "serve", "--port",
                               str(port)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in proc.stderr


def test_serve_refuses_non_loopback_address() -> None:
    proc = subprocess.run([sys.executable, "-m", "kubeberth", "serve", "--address",
                           "0.0.0.0", "--port", "0"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2
    assert "is not loopback" in proc.stderr


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True,
                   capture_output=True, timeout=60)
    return cert, key


def test_tls_with_kubectl(cluster_file: Path, tmp_path: Path, kubectl_bin: str,
                          certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    with EmbeddedServer(manifests=load_manifests(cluster_file), tls_cert=cert, tls_key=key,
                        token="tls-token") as srv:
        assert srv.url.startswith("https://127.0.0.1:")
        kubeconfig = srv.write_kubeconfig(tmp_path / "kc")
        out = subprocess.run([kubectl_bin, "--kubeconfig", str(kubeconfig), "get", "nodes",
                              "-o", "name"], capture_output=True, text=True, timeout=60,
                             env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
        assert out.returncode == 0, out.stderr
        assert len(out.stdout.split()) == 3


def test_serve_tls_and_token_from_the_command_line(cluster_file: Path, tmp_path: Path,
                                                   kubectl_bin: str,
                                                   certificate: tuple[Path, Path]) -> None:
    # kubectl sends a bearer token only over HTTPS, so a token comes with TLS.
    kubeconfig = tmp_path / "kc.yaml"
    proc, lines = _start("-f", str(cluster_file), "--port", "0", "--kubeconfig-out",
                         str(kubeconfig), "--token", "t0k", "--tls-cert-file",
                         str(certificate[0]), "--tls-private-key-file", str(certificate[1]))
    try:
        assert lines[0].startswith("kubeberth API server listening on https://127.0.0.1:")
        assert "token: t0k" in kubeconfig.read_text()
        env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
        out = subprocess.run([kubectl_bin, "--kubeconfig", str(kubeconfig), "get", "ns",
                              "-o", "name"], capture_output=True, text=True, timeout=60,
                             env=env)
        assert "namespace/default" in out.stdout.split(), out.stderr
        server = lines[0].split(" on ")[1].split(" ")[0]
        denied = subprocess.run([kubectl_bin, "--server", server, "--token", "wrong",
                                 "--insecure-skip-tls-verify", "get", "ns"],
                                capture_output=True, text=True, timeout=60, env=env)
        assert denied.returncode == 1
        assert "You must be logged in to the server" in denied.stderr
    finally:
        assert _stop(proc) == 0


def test_tls_needs_cert_and_key(certificate: tuple[Path, Path]) -> None:
    from kubeberth.api.errors import InputError

    with pytest.raises(InputError, match="both a certificate and its key"):
        EmbeddedServer(tls_cert=certificate[0])
    with pytest.raises(InputError, match="cannot load the TLS certificate"):
        EmbeddedServer(tls_cert=certificate[1], tls_key=certificate[1])
