package main

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// nominator keeps the pods preemption nominated, by node, in nomination order. The scheduling
// queue plays this part upstream; explain has no queue, so this small one stands in for it.
type nominator struct {
	mu     sync.Mutex
	byNode map[string][]fwk.PodInfo
	nodeOf map[types.UID]string
}

func newNominator() *nominator {
	return &nominator{byNode: map[string][]fwk.PodInfo{}, nodeOf: map[types.UID]string{}}
}

func (n *nominator) AddNominatedPod(_ klog.Logger, pi fwk.PodInfo, ni *fwk.NominatingInfo) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.deleteLocked(pi.GetPod())
	node := ""
	if ni.Mode() == fwk.ModeOverride {
		node = ni.NominatedNodeName
	} else {
		node = pi.GetPod().Status.NominatedNodeName
	}
	if node == "" {
		return
	}
	n.nodeOf[pi.GetPod().UID] = node
	n.byNode[node] = append(n.byNode[node], pi)
}

func (n *nominator) DeleteNominatedPodIfExists(pod *v1.Pod) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.deleteLocked(pod)
}

func (n *nominator) deleteLocked(pod *v1.Pod) {
	node, ok := n.nodeOf[pod.UID]
	if !ok {
		return
	}
	delete(n.nodeOf, pod.UID)
	kept := n.byNode[node][:0]
	for _, pi := range n.byNode[node] {
		if pi.GetPod().UID != pod.UID {
			kept = append(kept, pi)
		}
	}
	n.byNode[node] = kept
}

func (n *nominator) UpdateNominatedPod(logger klog.Logger, _ *v1.Pod, pi fwk.PodInfo) {
	n.AddNominatedPod(logger, pi, nil)
}

func (n *nominator) NominatedPodsForNode(node string) []fwk.PodInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]fwk.PodInfo(nil), n.byNode[node]...)
}
