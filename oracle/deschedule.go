package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"sigs.k8s.io/descheduler/pkg/descheduler"
	"sigs.k8s.io/descheduler/pkg/descheduler/evictions"
	nodeutil "sigs.k8s.io/descheduler/pkg/descheduler/node"
	podutil "sigs.k8s.io/descheduler/pkg/descheduler/pod"
	"sigs.k8s.io/descheduler/pkg/features"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"
	frameworkprofile "sigs.k8s.io/descheduler/pkg/framework/profile"
	frameworktypes "sigs.k8s.io/descheduler/pkg/framework/types"
)

// eviction is one entry of `kubeberth deschedule -o json`'s "evictions" (docs/descheduler.md).
type eviction struct {
	Pod    string `json:"pod"`
	Node   string `json:"node"`
	Plugin string `json:"plugin"`
	Reason string `json:"reason"`
}

// evictionSink is a logr sink that keeps the descheduler's own record of each eviction it
// accepted ("Evicted pod in dry run mode", logged under the evictor's lock, in order), which
// names the plugin (strategy) and reason; every other log line is dropped.
type evictionSink struct {
	mu   sync.Mutex
	seen []eviction
}

func (s *evictionSink) Init(logr.RuntimeInfo)  {}
func (s *evictionSink) Enabled(level int) bool { return level <= 1 }
func (s *evictionSink) Error(error, string, ...any) {
}
func (s *evictionSink) WithValues(...any) logr.LogSink { return s }
func (s *evictionSink) WithName(string) logr.LogSink   { return s }

func (s *evictionSink) Info(_ int, msg string, kv ...any) {
	if msg != "Evicted pod in dry run mode" {
		return
	}
	e := eviction{}
	for i := 0; i+1 < len(kv); i += 2 {
		val := fmt.Sprint(kv[i+1])
		switch kv[i] {
		case "pod":
			e.Pod = val
		case "node":
			e.Node = val
		case "strategy":
			e.Plugin = val
		case "reason":
			e.Reason = val
		}
	}
	s.mu.Lock()
	s.seen = append(s.seen, e)
	s.mu.Unlock()
}

// shiftTimes moves every timestamp by d: the descheduler's plugins measure ages against the
// wall clock, so the manifests are moved to make --now the present.
func shiftTimes(objs []runtime.Object, d time.Duration) {
	move := func(t *metav1.Time) {
		if t != nil && !t.IsZero() {
			t.Time = t.Add(d)
		}
	}
	for _, o := range objs {
		switch x := o.(type) {
		case *v1.Pod:
			move(&x.CreationTimestamp)
			move(x.DeletionTimestamp)
			move(x.Status.StartTime)
			for _, cs := range [][]v1.ContainerStatus{x.Status.ContainerStatuses, x.Status.InitContainerStatuses} {
				for i := range cs {
					if r := cs[i].State.Running; r != nil {
						move(&r.StartedAt)
					}
					if t := cs[i].State.Terminated; t != nil {
						move(&t.StartedAt)
						move(&t.FinishedAt)
					}
				}
			}
		case *v1.Node:
			move(&x.CreationTimestamp)
		}
	}
}

func runDeschedule(args []string) int {
	fs := flag.NewFlagSet("deschedule", flag.ExitOnError)
	var files multi
	fs.Var(&files, "f", "manifests file (repeatable)")
	policyPath := fs.String("policy", "", "DeschedulerPolicy file")
	nowText := fs.String("now", "", "the pass's clock (RFC 3339); default: the wall clock")
	output := fs.String("o", "json", "output format (json only)")
	_ = fs.Parse(args)
	if len(files) == 0 || *policyPath == "" || *output != "json" {
		usage()
	}
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		return 1
	}
	sink := &evictionSink{}
	flags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(flags)
	_ = flags.Set("v", "1")
	klog.SetLogger(logr.New(sink))

	objs, err := loadObjects(files)
	if err != nil {
		return fail(err)
	}
	if *nowText != "" {
		now, err := time.Parse(time.RFC3339, *nowText)
		if err != nil {
			return fail(err)
		}
		// Half a second of slack: ages are whole seconds, truncated, and the pass is quick.
		shiftTimes(objs, time.Since(now).Truncate(time.Second)+500*time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(objs...)
	// Dry run, as the descheduler's own --dry-run: evictions are accepted, nothing is removed
	// (pods evicted earlier in the pass still count for later plugins). The fake API server
	// does not enforce PodDisruptionBudgets.
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return a.GetSubresource() == "eviction", nil, nil
	})
	descheduler.SetupPlugins()
	policy, err := descheduler.LoadPolicyConfig(*policyPath, client, pluginregistry.PluginRegistry)
	if err != nil {
		return fail(err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	podInformer := factory.Core().V1().Pods().Informer()
	_ = factory.Core().V1().PersistentVolumeClaims().Informer()
	nodeLister := factory.Core().V1().Nodes().Lister()
	getPods, err := podutil.BuildGetPodsAssignedToNodeFunc(podInformer)
	if err != nil {
		return fail(err)
	}
	evictor, err := evictions.NewPodEvictor(ctx, client, events.NewFakeRecorder(1000), podInformer, features.DefaultMutableFeatureGate,
		evictions.NewOptions().
			WithPolicyGroupVersion("policy/v1").
			WithMaxPodsToEvictPerNode(policy.MaxNoOfPodsToEvictPerNode).
			WithMaxPodsToEvictPerNamespace(policy.MaxNoOfPodsToEvictPerNamespace).
			WithMaxPodsToEvictTotal(policy.MaxNoOfPodsToEvictTotal).
			WithGracePeriodSeconds(policy.GracePeriodSeconds).
			WithDryRun(true))
	if err != nil {
		return fail(err)
	}
	type runner struct {
		deschedule, balance func(context.Context, []*v1.Node) error
	}
	var runners []runner
	for idx, p := range policy.Profiles {
		prof, err := frameworkprofile.NewProfile(ctx, p, pluginregistry.PluginRegistry,
			frameworkprofile.WithClientSet(client),
			frameworkprofile.WithSharedInformerFactory(factory),
			frameworkprofile.WithPodEvictor(evictor),
			frameworkprofile.WithGetPodsAssignedToNodeFnc(getPods),
			frameworkprofile.WithProfileInstanceID(fmt.Sprintf("%d", idx)))
		if err != nil {
			return fail(fmt.Errorf("profile %q: %w", p.Name, err))
		}
		runners = append(runners, runner{
			deschedule: func(ctx context.Context, n []*v1.Node) error { return statusErr(prof.RunDeschedulePlugins(ctx, n)) },
			balance:    func(ctx context.Context, n []*v1.Node) error { return statusErr(prof.RunBalancePlugins(ctx, n)) },
		})
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	selector := ""
	if policy.NodeSelector != nil {
		selector = *policy.NodeSelector
	}
	nodes, err := nodeutil.ReadyNodes(ctx, client, nodeLister, selector)
	if err != nil {
		return fail(err)
	}
	// runProfiles: every profile's deschedule plugins, then every profile's balance plugins;
	// fewer than two ready nodes skip the cycle.
	if len(nodes) > 1 {
		for _, r := range runners {
			if err := r.deschedule(ctx, nodes); err != nil {
				fmt.Fprintln(os.Stderr, "oracle: deschedule:", err)
			}
		}
		for _, r := range runners {
			if err := r.balance(ctx, nodes); err != nil {
				fmt.Fprintln(os.Stderr, "oracle: balance:", err)
			}
		}
	}
	out := map[string]any{"evictions": append([]eviction{}, sink.seen...), "oracle": versions()}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fail(err)
	}
	return 0
}

func statusErr(st *frameworktypes.Status) error {
	if st == nil {
		return nil
	}
	return st.Err
}

// loadObjects reads the manifests for the descheduler: every pod (bound or not, any phase),
// with a UID (the evictor refuses pods without one).
func loadObjects(paths []string) ([]runtime.Object, error) {
	c, err := loadManifests(paths)
	if err != nil {
		return nil, err
	}
	var objs []runtime.Object
	for _, n := range c.nodes {
		objs = append(objs, n)
	}
	for _, p := range c.allPods {
		if p.UID == "" {
			p.UID = types.UID(p.Namespace + "/" + p.Name)
		}
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
	return objs, nil
}
