"""What admission does to pods: gate them until their workload is admitted, then release them
onto the assigned flavor.

Kueue's pod webhook adds the ``kueue.x-k8s.io/admission`` scheduling gate to every pod of a
queued workload, so kube-scheduler leaves it alone; on admission Kueue removes the gate and
merges the flavor's node labels into the pod's nodeSelector and appends the flavor's
tolerations, so the pod lands on nodes of the flavor whose quota it consumed.
"""

from __future__ import annotations

import msgspec

from kubeberth.admission.model import ADMISSION_GATE, Admission, ResourceFlavor
from kubeberth.api.objects import Pod, PodSchedulingGate


def gated_pod(pod: Pod) -> Pod:
    """The pod as it waits for admission: with Kueue's scheduling gate."""
    if any(g.name == ADMISSION_GATE for g in pod.spec.scheduling_gates):
        return pod
    gates = [*pod.spec.scheduling_gates, PodSchedulingGate(name=ADMISSION_GATE)]
    return msgspec.structs.replace(pod, spec=msgspec.structs.replace(
        pod.spec, scheduling_gates=gates))


def admitted_pod(pod: Pod, admission: Admission, podset: str,
                 flavors: dict[str, ResourceFlavor]) -> Pod:
    """The pod once its workload is admitted: ungated, with the node labels and tolerations of
    every flavor assigned to its podSet (a label the pod already selects is kept)."""
    spec = pod.spec
    selector = dict(spec.node_selector)
    tolerations = list(spec.tolerations)
    for psa in admission.podset_assignments:
        if psa.name != podset:
            continue
        for name in sorted(set(psa.flavors.values())):
            flavor = flavors.get(name)
            if flavor is None:
                continue
            for k, v in flavor.node_labels.items():
                selector.setdefault(k, v)
            tolerations.extend(t for t in flavor.tolerations if t not in tolerations)
    gates = [g for g in spec.scheduling_gates if g.name != ADMISSION_GATE]
    return msgspec.structs.replace(pod, spec=msgspec.structs.replace(
        spec, node_selector=selector, tolerations=tolerations, scheduling_gates=gates))
