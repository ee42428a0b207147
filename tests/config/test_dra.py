"""DeviceClass, ResourceSlice, ResourceClaim(Template) manifests: decoding and located errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubeberth.api.errors import InputError
from kubeberth.config.dra import load_dra
from kubeberth.config.manifests import load_manifests

ROOT = Path(__file__).resolve().parents[2]

CLAIM = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
        selectors:
        - cel: {expression: 'device.attributes["gpu.nvidia.com"].productName == "H100"'}
"""


def load(tmp_path: Path, text: str) -> object:
    f = tmp_path / "m.yaml"
    f.write_text(text)
    return load_dra(load_manifests(f))


def test_examples_decode() -> None:
    objs = load_dra(load_manifests([ROOT / "examples/dra/class.yaml",
                                    ROOT / "examples/dra/mig"]))
    assert [c.metadata.name for c in objs.classes] == ["gpu.nvidia.com"]
    counters, rs = objs.slices
    assert counters.spec.shared_counters[0].counters["memory"].value == "40Gi"
    assert rs.spec.devices[1].consumes_counters[0].counter_set == "gpu-0-counters"
    (tpl,) = objs.templates
    assert tpl.spec.spec.devices.requests[0].exactly is not None


def test_claim_decodes_with_namespace(tmp_path: Path) -> None:
    objs = load(tmp_path, CLAIM)
    assert objs.claims[0].key == "default/c"  # type: ignore[attr-defined]


@pytest.mark.parametrize(("text", "field", "words"), [
    (CLAIM.replace('== "H100"', '=='), "spec.devices.requests[0].exactly.selectors[0].cel"
     ".expression", "does not compile"),
    ("""\
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: gpu.nvidia.com
  pool: {name: p, resourceSliceCount: 1}
  nodeName: n1
  sharedCounters: [{name: gpu-0, counters: {memory: {value: 40Gi}}}]
  devices: [{name: gpu-0}]
""", "spec.devices", "both sharedCounters and devices"),
    (CLAIM.replace("deviceClassName: gpu.nvidia.com", "deviceClassName: gpu.nvidia.com\n"
                   "        allocationMode: Some"), "spec.devices.requests[0].exactly"
     ".allocationMode", "unknown allocationMode"),
    (CLAIM.replace("deviceClassName: gpu.nvidia.com", "deviceClassName: gpu.nvidia.com\n"
                   "        allocationMode: All\n        count: 2"),
     "spec.devices.requests[0].exactly.count", "count is set with allocationMode All"),
    (CLAIM.replace("deviceClassName: gpu.nvidia.com", "deviceClassName: gpu.nvidia.com\n"
                   "        count: 0"), "spec.devices.requests[0].exactly.count", "out of range"),
    (CLAIM.replace("- name: gpu", "- name: GPU"), "spec.devices.requests[0].name",
     "not a DNS label"),
    (CLAIM + "    constraints:\n    - {requests: [cpu], matchAttribute: gpu.nvidia.com/x}\n",
     "spec.devices.constraints[0].requests[0]", "does not have"),
    (CLAIM + "    constraints:\n    - {matchAttribute: nvlinkDomain}\n",
     "spec.devices.constraints[0].matchAttribute", "not a fully qualified"),
    (CLAIM.replace("      exactly:", "      firstAvailable: []\n      exactly:")
     .replace("    - name: gpu\n", "    - name: gpu\n      firstAvailable:\n"
              "      - {name: a, deviceClassName: x}\n", 1)
     .replace("      firstAvailable: []\n", ""), "spec.devices.requests[0]",
     "exactly one of exactly and firstAvailable"),
    ("""\
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: gpu.nvidia.com
  pool: {name: p, resourceSliceCount: 1}
  nodeName: n1
  allNodes: true
  devices: [{name: gpu-0}]
""", "spec", "exactly one of nodeName, nodeSelector, allNodes"),
    ("""\
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: gpu.nvidia.com
  pool: {name: p, resourceSliceCount: 1}
  nodeName: n1
  devices:
  - name: gpu-0
    capacity: {memory: {value: 8x}}
""", "spec.devices[0].capacity.memory.value", "not a quantity"),
    ("""\
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: gpu.nvidia.com
  pool: {name: p, resourceSliceCount: 1}
  nodeName: n1
  devices:
  - name: gpu-0
    attributes: {model: {string: a, int: 1}}
""", "spec.devices[0].attributes.model", "has 2 values"),
    ("""\
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  resourceClaims: [{name: gpu, resourceClaimName: a, resourceClaimTemplateName: b}]
  containers: [{name: c}]
""", "spec.resourceClaims[0]", "exactly one source"),
    ("""\
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  resourceClaims: [{name: gpu, resourceClaimName: a}]
  containers: [{name: c, resources: {claims: [{name: tpu}]}}]
""", "spec.containers[0].resources.claims[0].name", "does not list"),
])
def test_bad_objects_name_file_line_and_field(tmp_path: Path, text: str, field: str,
                                              words: str) -> None:
    with pytest.raises(InputError) as err:
        load(tmp_path, text)
    assert err.value.field == field
    assert words in str(err.value)
    assert err.value.source is not None and err.value.source.endswith("m.yaml")
    assert err.value.line is not None


def test_wrong_api_version_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        load(tmp_path, CLAIM.replace("resource.k8s.io/v1", "resource.k8s.io/v1beta1"))
    assert err.value.field == "apiVersion"


def test_duplicate_claims_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="defined twice"):
        load(tmp_path, CLAIM + "---\n" + CLAIM)
