package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
	_ "unsafe" // go:linkname, below

	"github.com/go-logr/logr"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/controller/core"
	"sigs.k8s.io/kueue/pkg/scheduler"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption/fairsharing"
	"sigs.k8s.io/kueue/pkg/util/routine"
	utiltesting "sigs.k8s.io/kueue/pkg/util/testing"
	"sigs.k8s.io/kueue/pkg/util/wait"
	"sigs.k8s.io/kueue/pkg/workload"
)

// Kueue's unit tests call the scheduler's cycle and set its admission goroutine wrapper from
// inside the package; the oracle reaches the same two unexported methods by their linker
// names (a scheduling cycle must run to completion, its admissions included, before the next
// one: Start would loop on its own clock).
//
//go:linkname scheduleCycle sigs.k8s.io/kueue/pkg/scheduler.(*Scheduler).schedule
func scheduleCycle(s *scheduler.Scheduler, ctx context.Context) wait.SpeedSignal

//go:linkname setAdmissionRoutineWrapper sigs.k8s.io/kueue/pkg/scheduler.(*Scheduler).setAdmissionRoutineWrapper
func setAdmissionRoutineWrapper(s *scheduler.Scheduler, w routine.Wrapper)

// maxAdmitCycles is kubeberth admit's own bound on cycles without --cycles.
const maxAdmitCycles = 1000

type admitRow struct {
	Name         string                       `json:"name"`
	ClusterQueue string                       `json:"clusterQueue"`
	State        string                       `json:"state"`
	Reason       string                       `json:"reason"`
	Flavors      map[string]map[string]string `json:"flavors"`
	Message      string                       `json:"message,omitempty"`
}

type preemptionRecord struct {
	Workload string `json:"workload"`
	By       string `json:"by"`
	Reason   string `json:"reason"`
	Cycle    int    `json:"cycle"`
}

type admitOutput struct {
	Workloads    []admitRow         `json:"workloads"`
	Preempted    []preemptionRecord `json:"preempted"`
	Cycles       int                `json:"cycles"`
	IgnoredKinds map[string]int     `json:"ignoredKinds,omitempty"`
	Oracle       map[string]any     `json:"oracle"`
}

func runAdmit(args []string) int {
	fs := flag.NewFlagSet("admit", flag.ExitOnError)
	var files multi
	fs.Var(&files, "f", "manifests file (repeatable)")
	cycles := fs.Int("cycles", 0, "stop after N scheduling cycles (0: until one changes nothing)")
	nowFlag := fs.String("now", "", "the clock, RFC3339 (default: the latest timestamp in the input)")
	output := fs.String("o", "json", "output format (json only)")
	_ = fs.Parse(args)
	if len(files) == 0 || *output != "json" || *cycles < 0 {
		usage()
	}
	flags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(flags)
	_ = flags.Set("logtostderr", "false")
	_ = flags.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
	ctrl.SetLogger(logr.Discard())
	in, err := loadKueue(files)
	if err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		return 2
	}
	// The fake client has no server-side apply: Kueue's unit tests turn its apply patches into
	// strategic merges, which keep what an apply would remove (a cleared status.admission stays).
	// With WorkloadRequestUseMergePatch Kueue writes merge patches, which the fake client applies
	// as the API server would. The Configuration's own featureGates come after.
	gates := map[string]bool{"WorkloadRequestUseMergePatch": true}
	for k, v := range in.config.FeatureGates {
		gates[k] = v
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(gates); err != nil {
		fmt.Fprintln(os.Stderr, "oracle: Configuration featureGates:", err)
		return 2
	}
	now := latestTimestamp(in)
	if *nowFlag != "" {
		if now, err = time.Parse(time.RFC3339, *nowFlag); err != nil {
			fmt.Fprintln(os.Stderr, "oracle: --now:", err)
			return 2
		}
	}
	out, err := admitRun(context.Background(), in, now, *cycles)
	if err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		return 1
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		return 1
	}
	return 0
}

// latestTimestamp is kubeberth admit's default clock: the latest creation or quota
// reservation time in the input (the epoch when there is none).
func latestTimestamp(in *kueueInput) time.Time {
	latest := time.Unix(0, 0).UTC()
	for _, wl := range in.workloads {
		if t := wl.CreationTimestamp.Time; !t.IsZero() && t.After(latest) {
			latest = t
		}
		if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved); c != nil && c.Status == "True" && c.LastTransitionTime.After(latest) {
			latest = c.LastTransitionTime.Time
		}
	}
	return latest
}

// admitHarness is Kueue's scheduler wired as its unit tests wire it (pkg/scheduler's
// TestSchedule): a controller-runtime fake client holding the objects, the scheduler cache
// and the queue manager fed from it, plus the workload controller's event handler, which a
// real cluster runs between cycles.
type admitHarness struct {
	cl       client.Client
	cache    *schdcache.Cache
	queues   *qcache.Manager
	requeue  interface{ ProcessRequeues(context.Context) int }
	sched    *scheduler.Scheduler
	wlEvents *core.WorkloadReconciler
	recorder *utiltesting.EventRecorder
	clock    *testingclock.FakeClock
	log      logr.Logger
	// seen is every workload as last delivered to the workload controller's event handler.
	seen map[string]*kueue.Workload
	wg   sync.WaitGroup
}

func newAdmitHarness(ctx context.Context, in *kueueInput, now time.Time) (*admitHarness, error) {
	lookup := utiltesting.NewClientBuilder().WithObjects(in.objects...).Build()
	if err := prepareWorkloads(ctx, lookup, in.workloads, now); err != nil {
		return nil, err
	}
	objs := append([]client.Object{}, in.objects...)
	for _, o := range in.flavors {
		objs = append(objs, o)
	}
	for _, o := range in.cohorts {
		objs = append(objs, o)
	}
	for _, o := range in.cqs {
		objs = append(objs, o)
	}
	for _, o := range in.lqs {
		objs = append(objs, o)
	}
	for _, o := range in.workloads {
		objs = append(objs, o)
	}
	cl := utiltesting.NewClientBuilder().
		WithObjects(objs...).
		WithStatusSubresource(&kueue.Workload{}, &kueue.ClusterQueue{}, &kueue.LocalQueue{}, &kueue.Cohort{}).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: utiltesting.TreatSSAAsStrategicMerge}).
		Build()
	h := &admitHarness{cl: cl, recorder: &utiltesting.EventRecorder{}, clock: testingclock.NewFakeClock(now),
		log: ctrl.Log, seen: map[string]*kueue.Workload{}}
	fairSharing := in.config.FairSharing
	h.cache = schdcache.New(cl, schdcache.WithFairSharing(fairsharing.Enabled(fairSharing)))
	expectations := preemptexpectations.New()
	h.queues, h.requeue = qcache.NewManagerForUnitTestsWithRequeuer(cl, h.cache,
		qcache.WithClock(h.clock), qcache.WithPreemptionExpectations(expectations))
	// The order of TestSchedule: local queues, flavors, cluster queues, cohorts; the queue
	// manager and the cache list the workloads of each queue from the client as it is added.
	for _, lq := range in.lqs {
		if err := h.queues.AddLocalQueue(ctx, lq); err != nil {
			return nil, fmt.Errorf("LocalQueue %s/%s: %w", lq.Namespace, lq.Name, err)
		}
	}
	for _, rf := range in.flavors {
		h.cache.AddOrUpdateResourceFlavor(h.log, rf)
	}
	for _, cq := range in.cqs {
		if err := h.cache.AddClusterQueue(ctx, cq); err != nil {
			return nil, fmt.Errorf("ClusterQueue %s: %w", cq.Name, err)
		}
		if err := h.queues.AddClusterQueue(ctx, cq); err != nil {
			return nil, fmt.Errorf("ClusterQueue %s: %w", cq.Name, err)
		}
	}
	for _, c := range in.cohorts {
		if err := h.cache.AddOrUpdateCohort(c); err != nil {
			return nil, fmt.Errorf("Cohort %s: %w", c.Name, err)
		}
		h.queues.AddOrUpdateCohort(ctx, c)
	}
	h.sched = scheduler.New(h.queues, h.cache, cl, h.recorder,
		scheduler.WithFairSharing(fairSharing), scheduler.WithClock(nil, h.clock),
		scheduler.WithPreemptionExpectations(expectations))
	setAdmissionRoutineWrapper(h.sched, routine.NewWrapper(func() { h.wg.Add(1) }, h.wg.Done))
	// Adding queues and cohorts asks the requeuer to retry their parked workloads; none are
	// parked yet, but the requests must not linger into the first cycle.
	h.requeue.ProcessRequeues(ctx)
	h.wlEvents = core.NewWorkloadReconciler(cl, h.queues, h.cache, h.recorder,
		core.WithPreemptionExpectations(expectations))
	wls, err := h.list(ctx)
	if err != nil {
		return nil, err
	}
	for _, wl := range wls {
		h.seen[string(workload.Key(wl))] = wl
	}
	return h, nil
}

func (h *admitHarness) list(ctx context.Context) ([]*kueue.Workload, error) {
	var list kueue.WorkloadList
	if err := h.cl.List(ctx, &list); err != nil {
		return nil, err
	}
	out := make([]*kueue.Workload, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	sort.Slice(out, func(i, j int) bool { return workload.Key(out[i]) < workload.Key(out[j]) })
	return out, nil
}

// hasHeads is whether a cycle would find a head: the queue manager's Heads blocks until one
// exists, and pops one from each active ClusterQueue's heap.
func (h *admitHarness) hasHeads() bool {
	for cq, wls := range h.queues.Dump() {
		if len(wls) > 0 && h.cache.ClusterQueueActive(cq) {
			return true
		}
	}
	return false
}

// state is what a cycle may change: every workload's status and the queues' contents.
func (h *admitHarness) state(ctx context.Context) (string, error) {
	wls, err := h.list(ctx)
	if err != nil {
		return "", err
	}
	statuses := make([]kueue.WorkloadStatus, len(wls))
	for i, wl := range wls {
		statuses[i] = wl.Status
	}
	dump := map[string]any{"workloads": statuses, "active": sortedDump(h.queues.Dump()),
		"inadmissible": sortedDump(h.queues.DumpInadmissible())}
	b, err := json.Marshal(dump)
	return string(b), err
}

func sortedDump(d map[kueue.ClusterQueueReference][]workload.Reference) map[string][]string {
	out := map[string][]string{}
	for cq, wls := range d {
		keys := make([]string, len(wls))
		for i, w := range wls {
			keys[i] = string(w)
		}
		sort.Strings(keys)
		out[string(cq)] = keys
	}
	return out
}

// preemptions are the preemptions one cycle issued, from the scheduler's own
// "PreemptedWorkload" events on each preemptor; the reason is the one written on the victim's
// Preempted condition. Upstream issues a cycle's preemptions in parallel: sorted by victim.
func (h *admitHarness) preemptions(ctx context.Context, from, cycle int) ([]preemptionRecord, error) {
	var out []preemptionRecord
	for _, ev := range h.recorder.RecordedEvents[from:] {
		if ev.Reason != "PreemptedWorkload" {
			continue
		}
		victim, _, ok := strings.Cut(strings.TrimPrefix(ev.Message, "Preempted workload "), " (UID:")
		if !ok {
			return nil, fmt.Errorf("unexpected PreemptedWorkload event: %q", ev.Message)
		}
		ns, name, _ := strings.Cut(victim, "/")
		var wl kueue.Workload
		if err := h.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &wl); err != nil {
			return nil, err
		}
		reason := ""
		if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPreempted); c != nil {
			reason = c.Reason
		}
		out = append(out, preemptionRecord{Workload: victim, By: ev.Key.String(), Reason: reason, Cycle: cycle})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Workload < out[j].Workload })
	return out, nil
}

// observeEvictions is what happens to an evicted workload before the next cycle when its job
// stops: the job reconciler (jobframework, step "handle eviction") clears the quota
// reservation and marks it requeued, on the API server.
func (h *admitHarness) observeEvictions(ctx context.Context) error {
	wls, err := h.list(ctx)
	if err != nil {
		return err
	}
	for _, wl := range wls {
		ev := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted)
		if ev == nil || ev.Status != "True" || !workload.HasQuotaReservation(wl) {
			continue
		}
		err := workload.PatchAdmissionStatus(ctx, h.cl, wl, h.clock, func(wl *kueue.Workload) (bool, error) {
			requeued := ev.Reason == kueue.WorkloadEvictedByPreemption || ev.Reason == kueue.WorkloadEvictedDueToNodeFailures
			updated := workload.SetRequeuedCondition(wl, ev.Reason, ev.Message, requeued)
			if workload.UnsetQuotaReservationWithCondition(wl, "Pending", ev.Message, h.clock.Now()) {
				updated = true
			}
			return updated, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// deliverEvents hands every workload changed since the last delivery to the workload
// controller's update handler, as the informer would, then moves the parked workloads it
// asked to move (the inadmissible-workload requeuer's work).
func (h *admitHarness) deliverEvents(ctx context.Context) error {
	wls, err := h.list(ctx)
	if err != nil {
		return err
	}
	for _, wl := range wls {
		key := string(workload.Key(wl))
		old := h.seen[key]
		if old != nil && old.ResourceVersion == wl.ResourceVersion {
			continue
		}
		if old != nil {
			h.wlEvents.Update(event.TypedUpdateEvent[*kueue.Workload]{ObjectOld: old, ObjectNew: wl})
		}
		h.seen[key] = wl
	}
	h.requeue.ProcessRequeues(ctx)
	return nil
}

func admitRun(ctx context.Context, in *kueueInput, now time.Time, cycles int) (*admitOutput, error) {
	ctx, cancel := context.WithCancel(ctrl.LoggerInto(ctx, ctrl.Log))
	defer cancel()
	h, err := newAdmitHarness(ctx, in, now)
	if err != nil {
		return nil, err
	}
	limit := cycles
	if limit == 0 {
		limit = maxAdmitCycles
	}
	out := &admitOutput{Preempted: []preemptionRecord{}, IgnoredKinds: in.ignored, Oracle: versions()}
	for out.Cycles < limit && h.hasHeads() {
		before, err := h.state(ctx)
		if err != nil {
			return nil, err
		}
		events := len(h.recorder.RecordedEvents)
		scheduleCycle(h.sched, ctx)
		h.wg.Wait()
		out.Cycles++
		issued, err := h.preemptions(ctx, events, out.Cycles)
		if err != nil {
			return nil, err
		}
		out.Preempted = append(out.Preempted, issued...)
		if len(issued) > 0 && out.Cycles < limit {
			if err := h.observeEvictions(ctx); err != nil {
				return nil, err
			}
		}
		if err := h.deliverEvents(ctx); err != nil {
			return nil, err
		}
		after, err := h.state(ctx)
		if err != nil {
			return nil, err
		}
		if len(issued) == 0 && before == after && cycles == 0 {
			break
		}
	}
	rows, err := h.rows(ctx, out.Preempted)
	if err != nil {
		return nil, err
	}
	out.Workloads = rows
	return out, nil
}

// rows is kubeberth admit's "workloads" list (docs/admission.md), read off the fake API server
// and the queue manager.
func (h *admitHarness) rows(ctx context.Context, preempted []preemptionRecord) ([]admitRow, error) {
	victims := map[string]string{}
	for _, p := range preempted {
		victims[p.Workload] = p.Reason
	}
	active := map[string]bool{}
	for _, wls := range h.queues.Dump() {
		for _, w := range wls {
			active[string(w)] = true
		}
	}
	parked := map[string]bool{}
	for _, wls := range h.queues.DumpInadmissible() {
		for _, w := range wls {
			parked[string(w)] = true
		}
	}
	wls, err := h.list(ctx)
	if err != nil {
		return nil, err
	}
	rows := []admitRow{}
	for _, wl := range wls {
		key := string(workload.Key(wl))
		row := admitRow{Name: key, Flavors: map[string]map[string]string{}}
		qr := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
		if qr != nil {
			row.Message = qr.Message
		}
		switch {
		case workload.HasQuotaReservation(wl):
			row.ClusterQueue = string(wl.Status.Admission.ClusterQueue)
			for _, psa := range wl.Status.Admission.PodSetAssignments {
				flavors := map[string]string{}
				for r, f := range psa.Flavors {
					flavors[string(r)] = string(f)
				}
				row.Flavors[string(psa.Name)] = flavors
			}
			switch {
			case workload.IsEvicted(wl) && victims[key] != "":
				row.State, row.Reason = "Preempted", victims[key]
			case workload.IsAdmitted(wl):
				row.State, row.Reason = "Admitted", "Admitted"
			default:
				row.State, row.Reason = "QuotaReserved", "QuotaReserved"
			}
		default:
			cq, ok := h.queues.ClusterQueueForWorkload(wl)
			row.Reason = "Pending"
			if qr != nil && qr.Status == "False" {
				row.Reason = qr.Reason
			}
			switch {
			case !workload.IsActive(wl):
				row.State, row.Reason = "Inadmissible", "Inadmissible"
			case !ok:
				row.State, row.Reason = "Inadmissible", "Inadmissible"
			case !h.cache.ClusterQueueActive(cq):
				row.ClusterQueue = string(cq)
				row.State, row.Reason = "Inadmissible", "Inadmissible"
			case victims[key] != "":
				row.ClusterQueue = string(cq)
				row.State, row.Reason = "Preempted", victims[key]
			case active[key]:
				row.ClusterQueue, row.State = string(cq), "Pending"
			case parked[key]:
				row.ClusterQueue, row.State = string(cq), "Inadmissible"
			default:
				return nil, fmt.Errorf("workload %s is in no queue", key)
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}
