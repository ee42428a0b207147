import msgspec
import pytest

from kubeberth.api.errors import InputError
from kubeberth.api.objects import Pod
from kubeberth.api.resources import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    is_extended_resource,
    pod_non_zero_requests,
    pod_requests,
)


def pod(spec: dict[str, object]) -> Pod:
    return msgspec.convert({"metadata": {"name": "p"}, "spec": spec}, Pod)


def test_sum_of_containers() -> None:
    p = pod({"containers": [
        {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
        {"resources": {"requests": {"cpu": "500m"}}},
    ]})
    assert pod_requests(p) == {"cpu": 1500, "memory": 2**30 * 1000}


def test_init_containers_take_max() -> None:
    p = pod({
        "containers": [{"resources": {"requests": {"cpu": "1"}}}],
        "initContainers": [{"resources": {"requests": {"cpu": "3"}}},
                           {"resources": {"requests": {"cpu": "2"}}}],
    })
    assert pod_requests(p)["cpu"] == 3000


def test_sidecars_add_to_app_and_to_later_init_containers() -> None:
    # sidecar 1 cpu runs alongside app 1 cpu (2), and during the later init container (1+2=3).
    p = pod({
        "containers": [{"resources": {"requests": {"cpu": "1"}}}],
        "initContainers": [
            {"restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
            {"resources": {"requests": {"cpu": "2"}}},
        ],
    })
    assert pod_requests(p)["cpu"] == 3000


def test_overhead_is_added() -> None:
    p = pod({"containers": [{"resources": {"requests": {"cpu": "1"}}}],
             "overhead": {"cpu": "250m", "memory": "10Mi"}})
    assert pod_requests(p) == {"cpu": 1250, "memory": 10 * 2**20 * 1000}


def test_non_zero_defaults_only_for_absent_keys() -> None:
    p = pod({"containers": [{"resources": {"requests": {"cpu": "0"}}}, {}]})
    nz = pod_non_zero_requests(p)
    assert nz["cpu"] == DEFAULT_MILLI_CPU_REQUEST  # 0 + 100m default for the second container
    assert nz["memory"] == 2 * DEFAULT_MEMORY_REQUEST
    assert pod_requests(p) == {"cpu": 0}


def test_pod_without_containers_requests_nothing() -> None:
    p = pod({"containers": []})
    assert pod_requests(p) == {}
    assert pod_non_zero_requests(p) == {}


def test_negative_quantity_names_field() -> None:
    p = pod({"containers": [{"resources": {"requests": {"cpu": "-1"}}}]})
    with pytest.raises(InputError) as err:
        pod_requests(p)
    assert "spec.containers[0].resources.requests.cpu" in str(err.value)
    assert "negative" in str(err.value)


def test_unparsable_quantity_names_field() -> None:
    p = pod({"initContainers": [{"resources": {"requests": {"memory": "lots"}}}]})
    with pytest.raises(InputError) as err:
        pod_requests(p)
    assert "spec.initContainers[0].resources.requests.memory" in str(err.value)


def test_extended_resource_names() -> None:
    assert is_extended_resource("nvidia.com/gpu")
    assert not is_extended_resource("cpu")
    assert not is_extended_resource("hugepages-2Mi")
    assert not is_extended_resource("kubernetes.io/something")


def test_limits_default_missing_requests_as_the_api_server_does() -> None:
    p = pod({"containers": [
        {"resources": {"limits": {"cpu": "2", "nvidia.com/gpu": "1"},
                       "requests": {"cpu": "500m"}}},
        {"resources": {"limits": {"memory": "1Gi"}}},
    ], "initContainers": [{"resources": {"limits": {"cpu": "4"}}}]})
    assert pod_requests(p) == {"cpu": 4000, "nvidia.com/gpu": 1000, "memory": 2**30 * 1000}
    # The non-zero defaults apply only where neither a request nor a limit names cpu/memory.
    assert pod_non_zero_requests(p)["memory"] == 2**30 * 1000 + DEFAULT_MEMORY_REQUEST


def test_bad_limit_names_the_limits_field() -> None:
    with pytest.raises(InputError) as info:
        pod_requests(pod({"containers": [{"resources": {"limits": {"cpu": "-1"}}}]}))
    assert info.value.field == "spec.containers[0].resources.limits.cpu"
