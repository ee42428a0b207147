package main

import (
	"context"
	"fmt"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	resourceslicetracker "k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	plugins "k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodevolumelimits"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
)

// The JSON shapes of docs/explain.md.
type verdict struct {
	Code    string   `json:"code"`
	Reasons []string `json:"reasons"`
}

type score struct {
	Raw        int64 `json:"raw"`
	Normalized int64 `json:"normalized"`
	Weighted   int64 `json:"weighted"`
}

type nodeEntry struct {
	Filter   map[string]verdict `json:"filter"`
	Score    map[string]score   `json:"score"`
	Total    int64              `json:"total"`
	Feasible bool               `json:"feasible"`
	Scored   bool               `json:"scored"`
}

type podEntry struct {
	Pod           string                `json:"pod"`
	Profile       string                `json:"profile,omitempty"`
	Result        string                `json:"result"`
	SelectedNode  *string               `json:"selectedNode"`
	NominatedNode *string               `json:"nominatedNode"`
	Victims       []string              `json:"victims"`
	Message       string                `json:"message"`
	Nodes         map[string]*nodeEntry `json:"nodes"`
	// Oracle-only: every node with the top total (upstream picks one of them at random), and
	// every nominated node a repeated PostFilter came back with (it breaks ties at random too).
	TopNodes          []string            `json:"topNodes"`
	PreemptionOptions map[string][]string `json:"preemptionOptions,omitempty"`
	// Upstream orders victims by importance: priority, then start time, and a bound pod without
	// status.startTime counts as started "now" at each comparison, so the order of such pods of
	// equal priority is arbitrary.
	VictimsOrderUndefined bool `json:"victimsOrderUndefined,omitempty"`
}

type explainOutput struct {
	Pods    []*podEntry    `json:"pods"`
	Oracle  map[string]any `json:"oracle"`
	Ignored map[string]int `json:"ignoredKinds"`
}

// profileRun is one profile's framework plus its own instances of the Filter plugins, which
// explain runs one by one (the framework stops at the first failing Filter).
type profileRun struct {
	fw      framework.Framework
	filters []fwk.FilterPlugin
	weights map[string]int64
}

// recorder notes the pods preemption deletes; while dryRun is set it keeps them in the
// fake API server so that PostFilter can be asked again (its tie-break is random).
type recorder struct {
	mu      sync.Mutex
	dryRun  bool
	deleted []string
}

func (r *recorder) react(action k8stesting.Action) (bool, runtime.Object, error) {
	del := action.(k8stesting.DeleteAction)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deleted = append(r.deleted, del.GetNamespace()+"/"+del.GetName())
	return r.dryRun, nil, nil
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.deleted
	r.deleted = nil
	return out
}

type explainer struct {
	ctx     context.Context
	logger  klog.Logger
	cfg     *config.KubeSchedulerConfiguration
	client  *fake.Clientset
	cache   cache.Cache
	snap    *cache.Snapshot
	nom     *nominator
	rec     *recorder
	runs    map[string]*profileRun
	hints   map[string]string
	podByID map[string]*v1.Pod
	next    int // upstream's nextStartNodeIndex
}

func newExplainer(ctx context.Context, c *cluster, cfg *config.KubeSchedulerConfiguration, hints map[string]string) (*explainer, error) {
	var objs []runtime.Object
	for _, n := range c.nodes {
		objs = append(objs, n)
	}
	for _, p := range append(append([]*v1.Pod(nil), c.bound...), c.pending...) {
		objs = append(objs, p)
	}
	for _, o := range c.pdbs {
		objs = append(objs, o)
	}
	for _, o := range c.namespaces {
		objs = append(objs, o)
	}
	for _, o := range c.classes {
		objs = append(objs, o)
	}
	objs = append(objs, c.dra...)
	client := fake.NewClientset(objs...)
	rec := &recorder{}
	client.PrependReactor("delete", "pods", rec.react)
	e := &explainer{
		ctx: ctx, logger: klog.FromContext(ctx), cfg: cfg, client: client, rec: rec,
		cache: cache.New(ctx, nil, false, false), snap: cache.NewEmptySnapshot(), nom: newNominator(),
		runs: map[string]*profileRun{}, hints: hints, podByID: map[string]*v1.Pod{},
	}
	for _, n := range c.nodes {
		e.cache.AddNode(e.logger, n)
	}
	for _, p := range c.bound {
		if err := e.cache.AddPod(e.logger, p); err != nil {
			return nil, err
		}
		e.podByID[p.Namespace+"/"+p.Name] = p
	}
	if err := e.cache.UpdateSnapshot(e.logger, e.snap); err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	// The DRA and CSI managers, wired as scheduler.New wires them, so that DynamicResources
	// and NodeVolumeLimits run as they do in kube-scheduler (on a cluster without claims).
	var draManager fwk.SharedDRAManager
	if utilfeature.DefaultFeatureGate.Enabled(features.DynamicResourceAllocation) {
		claims := assumecache.NewAssumeCache(e.logger, factory.Resource().V1().ResourceClaims().Informer(), "ResourceClaim", "", nil)
		opts := resourceslicetracker.Options{
			EnableDeviceTaintRules:   utilfeature.DefaultFeatureGate.Enabled(features.DRADeviceTaintRules),
			EnableConsumableCapacity: utilfeature.DefaultFeatureGate.Enabled(features.DRAConsumableCapacity),
			SliceInformer:            factory.Resource().V1().ResourceSlices(),
			KubeClient:               client,
		}
		if opts.EnableDeviceTaintRules {
			opts.TaintInformer = factory.Resource().V1().DeviceTaintRules()
		}
		slices, err := resourceslicetracker.StartTracker(ctx, opts)
		if err != nil {
			return nil, err
		}
		draManager = dynamicresources.NewDRAManager(ctx, claims, slices, factory)
	}
	csiManager := nodevolumelimits.NewCSIManager(factory.Storage().V1().CSINodes().Lister())
	for i := range cfg.Profiles {
		prof := &cfg.Profiles[i]
		// The framework builds each plugin once; keep its instances to run Filters one by one.
		built := map[string]fwk.Plugin{}
		registry := frameworkruntime.Registry{}
		for name, factoryFn := range plugins.NewInTreeRegistry() {
			registry[name] = func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
				pl, err := factoryFn(ctx, args, h)
				built[name] = pl
				return pl, err
			}
		}
		fw, err := frameworkruntime.NewFramework(ctx, registry, prof,
			frameworkruntime.WithClientSet(client),
			frameworkruntime.WithInformerFactory(factory),
			frameworkruntime.WithSnapshotSharedLister(e.snap),
			frameworkruntime.WithMutableSnapshotLister(e.snap),
			frameworkruntime.WithPodNominator(e.nom),
			frameworkruntime.WithEventRecorder(&events.FakeRecorder{}),
			frameworkruntime.WithParallelism(1),
			frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
			frameworkruntime.WithPodsInPreBind(frameworkruntime.NewPodsInPreBindMap()),
			frameworkruntime.WithLogger(e.logger),
			frameworkruntime.WithSharedDRAManager(draManager),
			frameworkruntime.WithSharedCSIManager(csiManager),
		)
		if err != nil {
			return nil, fmt.Errorf("profile %s: %w", prof.SchedulerName, err)
		}
		run := &profileRun{fw: fw, weights: map[string]int64{}}
		listed := fw.ListPlugins()
		for _, p := range listed.Filter.Enabled {
			run.filters = append(run.filters, built[p.Name].(fwk.FilterPlugin))
		}
		for _, p := range listed.Score.Enabled {
			run.weights[p.Name] = int64(p.Weight)
		}
		e.runs[prof.SchedulerName] = run
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	if err := waitForDRA(ctx, draManager, c); err != nil {
		return nil, err
	}
	return e, nil
}

func strp(s string) *string { return &s }

func verdictOf(st *fwk.Status) verdict {
	if st == nil {
		return verdict{Code: fwk.Success.String(), Reasons: []string{}}
	}
	reasons := st.Reasons()
	if reasons == nil {
		reasons = []string{}
	}
	return verdict{Code: st.Code().String(), Reasons: reasons}
}

// numFeasibleNodesToFind is kube-scheduler's cut of the feasible nodes to score (an
// unexported method of its Scheduler, restated here with the same constants).
func numFeasibleNodesToFind(global, profile *int32, all int32) int32 {
	const minFeasibleNodesToFind, minFeasibleNodesPercentageToFind = 100, 5
	if all < minFeasibleNodesToFind {
		return all
	}
	var pct int32
	if profile != nil {
		pct = *profile
	} else if global != nil {
		pct = *global
	}
	if pct == 0 {
		pct = 50 - all/125
		if pct < minFeasibleNodesPercentageToFind {
			pct = minFeasibleNodesPercentageToFind
		}
	}
	n := all * pct / 100
	if n < minFeasibleNodesToFind {
		return minFeasibleNodesToFind
	}
	return n
}

// nominatedView is the node as RunFilterPluginsWithNominatedPods sees it on its first pass:
// with the nominated pods of at least the pod's priority added (and PreFilter told so).
func (e *explainer) nominatedView(fw framework.Framework, state fwk.CycleState, pod *v1.Pod, info fwk.NodeInfo) (bool, fwk.CycleState, fwk.NodeInfo, error) {
	nominated := e.nom.NominatedPodsForNode(info.Node().Name)
	if len(nominated) == 0 {
		return false, state, info, nil
	}
	added := false
	stateOut := state.Clone()
	infoOut := info.Snapshot()
	for _, pi := range nominated {
		if corev1helpers.PodPriority(pi.GetPod()) >= corev1helpers.PodPriority(pod) && pi.GetPod().UID != pod.UID {
			infoOut.AddPodInfo(pi)
			if st := fw.RunPreFilterExtensionAddPod(e.ctx, stateOut, pod, pi, infoOut); !st.IsSuccess() {
				return false, state, info, st.AsError()
			}
			added = true
		}
	}
	return added, stateOut, infoOut, nil
}

// filterOne is one Filter plugin's verdict the way RunFilterPluginsWithNominatedPods would
// give it: with the nominated pods, and again without them when that passes.
func (e *explainer) filterOne(pl fwk.FilterPlugin, state fwk.CycleState, pod *v1.Pod, info fwk.NodeInfo,
	added bool, nState fwk.CycleState, nInfo fwk.NodeInfo) *fwk.Status {
	st := pl.Filter(e.ctx, nState, pod, nInfo)
	if st.IsSuccess() && added {
		st = pl.Filter(e.ctx, state, pod, info)
	}
	return st
}

func (e *explainer) schedule(pod *v1.Pod, run *profileRun) (*podEntry, error) {
	fw := run.fw
	key := pod.Namespace + "/" + pod.Name
	entry := &podEntry{Pod: key, Profile: fw.ProfileName(), Victims: []string{}, Nodes: map[string]*nodeEntry{}, TopNodes: []string{}}
	if err := e.cache.UpdateSnapshot(e.logger, e.snap); err != nil {
		return nil, err
	}
	allNodes, err := e.snap.ListNodesInPlacement()
	if err != nil {
		return nil, err
	}
	for _, ni := range allNodes {
		entry.Nodes[ni.Node().Name] = &nodeEntry{Filter: map[string]verdict{}, Score: map[string]score{}}
	}
	fail := func(msg string) (*podEntry, error) {
		entry.Result, entry.Message = "Error", msg
		return entry, nil
	}
	if len(allNodes) == 0 {
		entry.Result, entry.Message = "Unschedulable", "no nodes available to schedule pods"
		return entry, nil
	}
	state := framework.NewCycleState()
	diagnosis := framework.Diagnosis{NodeToStatus: framework.NewDefaultNodeToStatus()}
	preRes, s, unschedulable := fw.RunPreFilterPlugins(e.ctx, state, pod)
	diagnosis.UnschedulablePlugins = unschedulable
	var feasible []fwk.NodeInfo
	if !s.IsSuccess() {
		if !s.IsRejected() {
			return fail(s.AsError().Error())
		}
		diagnosis.NodeToStatus.SetAbsentNodesStatus(s)
		diagnosis.PreFilterMsg = s.Message()
		diagnosis.AddPluginStatus(s)
	} else {
		nodes := allNodes
		if !preRes.AllNodes() {
			nodes = nil
			for _, ni := range allNodes {
				if preRes.NodeNames.Has(ni.Node().Name) {
					nodes = append(nodes, ni)
				}
			}
			diagnosis.NodeToStatus.SetAbsentNodesStatus(fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
				fmt.Sprintf("node(s) didn't satisfy plugin(s) %v", sortedKeys(unschedulable))))
		}
		skip := state.GetSkipFilterPlugins()
		toFind := numFeasibleNodesToFind(e.cfg.PercentageOfNodesToScore, fw.PercentageOfNodesToScore(), int32(len(nodes)))
		if !fw.HasScorePlugins() {
			toFind = 1
		}
		processed, cut := 0, false
		for i := range nodes {
			info := nodes[(e.next+i)%len(nodes)]
			ne := entry.Nodes[info.Node().Name]
			added, nState, nInfo, err := e.nominatedView(fw, state, pod, info)
			if err != nil {
				return fail(err.Error())
			}
			for _, pl := range run.filters {
				if skip.Has(pl.Name()) {
					continue
				}
				ne.Filter[pl.Name()] = verdictOf(e.filterOne(pl, state, pod, info, added, nState, nInfo))
			}
			st := fw.RunFilterPluginsWithNominatedPods(e.ctx, state, pod, info)
			if st.Code() == fwk.Error {
				return fail(st.AsError().Error())
			}
			ne.Feasible = st.IsSuccess()
			if cut {
				continue // upstream stopped looking; explain still reports the verdicts
			}
			if st.IsSuccess() {
				if int32(len(feasible)) == toFind {
					cut = true
					continue
				}
				feasible = append(feasible, info)
			} else {
				diagnosis.NodeToStatus.Set(info.Node().Name, st)
				diagnosis.AddPluginStatus(st)
			}
			processed++
		}
		if !fw.HasFilterPlugins() {
			feasible = feasible[:0]
			for i := 0; i < int(toFind); i++ {
				feasible = append(feasible, nodes[(e.next+i)%len(nodes)])
			}
		}
		e.next = (e.next + processed) % len(allNodes)
	}

	if len(feasible) == 0 {
		return e.postFilter(entry, run, state, pod, &diagnosis, len(allNodes))
	}
	var chosen string
	if len(feasible) == 1 {
		// schedulePod takes a lone feasible node without scoring.
		chosen = feasible[0].Node().Name
		entry.TopNodes = []string{chosen}
	} else {
		if st := fw.RunPreScorePlugins(e.ctx, state, pod, feasible); !st.IsSuccess() {
			return fail(st.AsError().Error())
		}
		scores := make([]fwk.NodePluginScores, len(feasible))
		for i, info := range feasible {
			raw, st := fw.RunRawScorePlugins(e.ctx, state, pod, info)
			if !st.IsSuccess() {
				// The error as schedulePod reports it: RunScorePlugins' own wording.
				if _, all := fw.RunScorePlugins(e.ctx, state, pod, feasible); !all.IsSuccess() {
					return fail(all.AsError().Error())
				}
				return fail(st.AsError().Error())
			}
			scores[i] = fwk.NodePluginScores{Name: info.Node().Name, RawScores: raw}
		}
		if st := fw.NormalizeScores(e.ctx, state, pod, scores); !st.IsSuccess() {
			return fail(st.AsError().Error())
		}
		best := int64(-1 << 62)
		for _, ns := range scores {
			ne := entry.Nodes[ns.Name]
			ne.Scored, ne.Total = true, ns.TotalScore
			raws := map[string]int64{}
			for _, r := range ns.RawScores {
				raws[r.Name] = r.Score
			}
			for _, w := range ns.Scores {
				weight := run.weights[w.Name]
				ne.Score[w.Name] = score{Raw: raws[w.Name], Normalized: w.Score / weight, Weighted: w.Score}
			}
			if ns.TotalScore > best {
				best, entry.TopNodes = ns.TotalScore, nil
			}
			if ns.TotalScore == best {
				entry.TopNodes = append(entry.TopNodes, ns.Name)
			}
		}
		sort.Strings(entry.TopNodes)
		chosen = framework.NewSortedScoredNodes(scores).Pop().Name
		if h, ok := e.hints[key]; ok && contains(entry.TopNodes, h) {
			chosen = h // the same tie-break as the run being compared
		}
	}
	// Bind: the pod joins its node before the next pod is attempted.
	bound := pod.DeepCopy()
	bound.Spec.NodeName = chosen
	if err := e.cache.AddPod(e.logger, bound); err != nil {
		return nil, err
	}
	e.podByID[key] = bound
	e.nom.DeleteNominatedPodIfExists(pod)
	entry.Result, entry.SelectedNode = "Scheduled", strp(chosen)
	return entry, nil
}

// postFilter runs PostFilter (DefaultPreemption) for an unschedulable pod. Its node choice
// breaks ties at random, so it is asked repeatedly (victims only recorded, not deleted) until
// it returns the node the compared run chose, or often enough to have seen every option.
func (e *explainer) postFilter(entry *podEntry, run *profileRun, state fwk.CycleState, pod *v1.Pod,
	diagnosis *framework.Diagnosis, numAll int) (*podEntry, error) {
	fw := run.fw
	fitErr := &framework.FitError{Pod: pod, NumAllNodes: numAll, Diagnosis: *diagnosis}
	entry.Result = "Unschedulable"
	if !fw.HasPostFilterPlugins() {
		entry.Message = fitErr.Error()
		return entry, nil
	}
	hint, hinted := e.hints[entry.Pod]
	tries := 10*numAll + 10
	type outcome struct {
		victims []string
		msg     string
	}
	options := map[string]outcome{}
	var first string
	e.rec.dryRun = true
	for i := 0; i < tries; i++ {
		res, st := fw.RunPostFilterPlugins(e.ctx, state.Clone(), pod, diagnosis.NodeToStatus)
		victims := e.rec.take()
		node := ""
		if res != nil && res.NominatingInfo != nil && res.Mode() == fwk.ModeOverride {
			node = res.NominatedNodeName
		}
		if _, seen := options[node]; !seen {
			options[node] = outcome{victims: victims, msg: st.Message()}
			if i == 0 {
				first = node
			}
		}
		if node == "" || (hinted && node == hint) {
			break
		}
	}
	e.rec.dryRun = false
	chosen := first
	if _, ok := options[hint]; hinted && ok {
		chosen = hint
	}
	entry.PreemptionOptions = map[string][]string{}
	for node, o := range options {
		if node != "" {
			entry.PreemptionOptions[node] = o.victims
		}
	}
	fitErr.Diagnosis.PostFilterMsg = options[chosen].msg
	entry.Message = fitErr.Error()
	if chosen == "" {
		return entry, nil
	}
	entry.NominatedNode = strp(chosen)
	entry.Victims = append(entry.Victims, options[chosen].victims...)
	seen := map[int32]bool{}
	for _, v := range entry.Victims {
		if victim, ok := e.podByID[v]; ok && victim.Status.StartTime == nil {
			prio := corev1helpers.PodPriority(victim)
			entry.VictimsOrderUndefined = entry.VictimsOrderUndefined || seen[prio]
			seen[prio] = true
		}
	}
	// Apply: victims leave, lower-priority nominations on the node are cleared (as
	// prepareCandidate does), and the preemptor is nominated.
	for _, v := range entry.Victims {
		if victim, ok := e.podByID[v]; ok {
			if err := e.cache.RemovePod(e.logger, victim); err != nil {
				return nil, err
			}
			delete(e.podByID, v)
			_ = e.client.CoreV1().Pods(victim.Namespace).Delete(e.ctx, victim.Name, metav1.DeleteOptions{})
			e.rec.take()
		}
	}
	for _, pi := range e.nom.NominatedPodsForNode(chosen) {
		if corev1helpers.PodPriority(pi.GetPod()) < corev1helpers.PodPriority(pod) {
			e.nom.DeleteNominatedPodIfExists(pi.GetPod())
		}
	}
	pi, err := framework.NewPodInfo(pod)
	if err != nil {
		return nil, err
	}
	e.nom.AddNominatedPod(e.logger, pi, &fwk.NominatingInfo{NominatedNodeName: chosen, NominatingMode: fwk.ModeOverride})
	return entry, nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func sortedKeys[T any](m map[string]T) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// explain attempts every pending pod once, in PrioritySort's queue order (priority, then
// arrival), each decision applied before the next, and reports it as docs/explain.md says.
func explain(ctx context.Context, c *cluster, cfg *config.KubeSchedulerConfiguration, hints map[string]string) (*explainOutput, error) {
	e, err := newExplainer(ctx, c, cfg, hints)
	if err != nil {
		return nil, err
	}
	queue := append([]*v1.Pod(nil), c.pending...)
	sort.SliceStable(queue, func(i, j int) bool {
		return corev1helpers.PodPriority(queue[i]) > corev1helpers.PodPriority(queue[j])
	})
	out := &explainOutput{Pods: []*podEntry{}, Ignored: c.ignored}
	var gated, notOurs []*podEntry
	for _, pod := range queue {
		key := pod.Namespace + "/" + pod.Name
		run, ok := e.runs[pod.Spec.SchedulerName]
		if !ok {
			notOurs = append(notOurs, &podEntry{Pod: key, Result: "NotOurs", Victims: []string{}, Nodes: map[string]*nodeEntry{},
				Message: fmt.Sprintf("schedulerName '%s' matches no profile", pod.Spec.SchedulerName)})
			continue
		}
		if g := preEnqueue(ctx, run.fw, pod); g != "" {
			gated = append(gated, &podEntry{Pod: key, Result: "SchedulingGated", Victims: []string{}, Nodes: map[string]*nodeEntry{},
				Message: "blocked by " + g})
			continue
		}
		entry, err := e.schedule(pod, run)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		out.Pods = append(out.Pods, entry)
	}
	out.Pods = append(append(out.Pods, gated...), notOurs...)
	out.Oracle = versions()
	return out, nil
}

// preEnqueue returns the PreEnqueue plugin that keeps the pod out of the queue, if any.
func preEnqueue(ctx context.Context, fw framework.Framework, pod *v1.Pod) string {
	for _, pl := range fw.PreEnqueuePlugins() {
		if st := pl.PreEnqueue(ctx, pod); !st.IsSuccess() {
			return pl.Name()
		}
	}
	return ""
}
