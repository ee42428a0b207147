"""Fixtures: ``api`` runs a test once against the embedded server and once against a real
cluster (tests/realcluster/cluster.py). The real cluster is started once per session from the
oracle binary (oracle/build.sh); without it the real half skips, or fails under CI=1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.oracle.harness import oracle_binary
from tests.realcluster.cluster import NATIVE_API, Api, RealCluster, Running, reset

from kubeberth.apiserver import EmbeddedServer, ManualClock
from kubeberth.apiserver.resources import runtime_config


@pytest.fixture(scope="session")
def real_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    cluster = RealCluster(oracle_binary(), tmp_path_factory.mktemp("realcluster"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(params=["embedded", pytest.param("real", marks=pytest.mark.slow)])
def api(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Api]:
    if request.param == "embedded":
        server = EmbeddedServer(clock=ManualClock(), bookmark_interval=0.2,
                                apis=runtime_config(f"{NATIVE_API}=true"))
        server.start()
        env = Api("embedded", tmp_path, embedded=server)
        try:
            yield env
        finally:
            env.close()
            server.stop()
    else:
        real: RealCluster = request.getfixturevalue("real_cluster")
        reset(real)
        env = Api("real", tmp_path, real=real)
        try:
            yield env
        finally:
            env.close()


@pytest.fixture
def real_api(real_cluster: RealCluster, tmp_path: Path) -> Iterator[Api]:
    """The real cluster alone, for what only it has (an authorizer)."""
    reset(real_cluster)
    env = Api("real", tmp_path, real=real_cluster)
    try:
        yield env
    finally:
        env.close()


@pytest.fixture
def running() -> Iterator[Running]:
    r = Running()
    try:
        yield r
    finally:
        r.close()
