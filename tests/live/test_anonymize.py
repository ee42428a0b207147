"""``snapshot --anonymize``'s replacement: one map for every place a name or label appears, the
labels the scheduler gives a meaning kept, nothing that says what runs left."""

from __future__ import annotations

from kubeberth.live.anonymize import Anonymizer

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "rack7-gpu3", "labels": {
    "kubernetes.io/hostname": "rack7-gpu3", "topology.kubernetes.io/zone": "eu-1a",
    "nvidia.com/gpu.product": "NVIDIA-H100", "acme.com/rack": "rack7"}}}
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {
    "name": "acme-llm-0", "namespace": "acme-research", "labels": {"app": "llm"},
    "annotations": {"acme.com/owner": "alice", "kubeberth.io/duration-seconds": "60"},
    "ownerReferences": [{"kind": "ReplicaSet", "name": "acme-llm-5d8f", "controller": True}]},
    "spec": {
        "nodeName": "rack7-gpu3", "priorityClassName": "system-node-critical",
        "containers": [{"name": "c", "image": "acme/secret:1", "env": [{"name": "TOKEN"}],
                        "command": ["run"]}],
        "topologySpreadConstraints": [{"topologyKey": "acme.com/rack", "maxSkew": 1,
                                       "matchLabelKeys": ["app"],
                                       "labelSelector": {"matchLabels": {"app": "llm"}}}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                    "values": ["rack7-gpu3"]}]},
                                  {"matchExpressions": [{"key": "kubernetes.io/hostname",
                                                         "operator": "In",
                                                         "values": ["rack7-gpu3"]}]}]}}}}}


def test_one_map_everywhere_and_meaningful_labels_kept() -> None:
    a = Anonymizer()
    node, pod = a.object(NODE), a.object(POD)
    name = node["metadata"]["name"]
    assert name == "node-1" and pod["spec"]["nodeName"] == name
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == name
    assert labels["topology.kubernetes.io/zone"] == "eu-1a"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100"
    assert "acme.com/rack" not in labels
    rack = a.mapping["label-key"]["acme.com/rack"]
    spread = pod["spec"]["topologySpreadConstraints"][0]
    assert spread["topologyKey"] == rack and rack in labels
    app = a.mapping["label-key"]["app"]
    assert spread["matchLabelKeys"] == [app] and pod["metadata"]["labels"] == {
        app: spread["labelSelector"]["matchLabels"][app]}
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchFields"][0]["values"] == [name]
    assert terms[1]["matchExpressions"][0]["values"] == [name]
    meta = pod["metadata"]
    assert meta["namespace"] == "namespace-1" and meta["name"] == "pod-1"
    assert meta["ownerReferences"][0]["name"] == "replicaset-1"
    assert meta["annotations"] == {"kubeberth.io/duration-seconds": "60"}
    assert pod["spec"]["priorityClassName"] == "system-node-critical"
    assert pod["spec"]["containers"] == [{"name": "c", "image": "image"}]
    assert "acme" not in repr((node, pod))
    # The same names again: the same replacements.
    assert a.object(NODE) == node and a.object(POD) == pod
