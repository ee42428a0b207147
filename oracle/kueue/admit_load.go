package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1beta1 "sigs.k8s.io/kueue/apis/config/v1beta1"
	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueuev1beta1 "sigs.k8s.io/kueue/apis/kueue/v1beta1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/features"
	utilpriority "sigs.k8s.io/kueue/pkg/util/priority"
	"sigs.k8s.io/kueue/pkg/workload"
)

// kueueInput is what `kubeberth admit` reads, as the objects Kueue's API server would hold:
// v1beta1 objects converted to v1beta2 by Kueue's own conversion functions, the CRDs' defaults
// filled in, workloads' priorities resolved.
type kueueInput struct {
	// objects go into the fake API server as they are (namespaces, priority classes, ...).
	objects   []client.Object
	flavors   []*kueue.ResourceFlavor
	cohorts   []*kueue.Cohort
	cqs       []*kueue.ClusterQueue
	lqs       []*kueue.LocalQueue
	workloads []*kueue.Workload
	config    configapi.Configuration
	ignored   map[string]int
}

// kueueScheme holds both API versions with their conversions, and the configuration API
// with its defaulting (Kueue's manager registers the same).
func kueueScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(kueue.AddToScheme(s))
	utilruntime.Must(kueuev1beta1.AddToScheme(s))
	utilruntime.Must(configapi.AddToScheme(s))
	utilruntime.Must(configv1beta1.AddToScheme(s))
	return s
}

// crdDefaults fills what Kueue's CRDs default (their +kubebuilder:default markers) and the API
// server would write on create, on the raw document, so that an omitted field and an explicit
// zero stay apart (a podSet's count defaults to 1, not 0).
func crdDefaults(kind string, doc map[string]any) {
	spec := child(doc, "spec")
	switch kind {
	case "ClusterQueue":
		setDefault(spec, "queueingStrategy", "BestEffortFIFO")
		setDefault(spec, "stopPolicy", "None")
		ff := child(spec, "flavorFungibility")
		setDefault(ff, "whenCanBorrow", "MayStopSearch")
		setDefault(ff, "whenCanPreempt", "TryNextFlavor")
		p := child(spec, "preemption")
		setDefault(p, "withinClusterQueue", "Never")
		setDefault(p, "reclaimWithinCohort", "Never")
		setDefault(child(p, "borrowWithinCohort"), "policy", "Never")
		fairSharingWeight(spec)
	case "Cohort":
		fairSharingWeight(spec)
	case "LocalQueue":
		setDefault(spec, "stopPolicy", "None")
	case "Workload":
		setDefault(spec, "active", true)
		podSets, _ := spec["podSets"].([]any)
		for _, ps := range podSets {
			if m, ok := ps.(map[string]any); ok {
				setDefault(m, "name", "main")
				setDefault(m, "count", 1)
			}
		}
	}
}

func child(m map[string]any, key string) map[string]any {
	if c, ok := m[key].(map[string]any); ok {
		return c
	}
	c := map[string]any{}
	m[key] = c
	return c
}

func setDefault(m map[string]any, key string, value any) {
	if _, ok := m[key]; !ok {
		m[key] = value
	}
}

func fairSharingWeight(spec map[string]any) {
	if fs, ok := spec["fairSharing"].(map[string]any); ok {
		setDefault(fs, "weight", "1")
	}
}

// decodeKueue reads one Kueue object of either served version into its v1beta2 type.
func decodeKueue(s *runtime.Scheme, tm metav1.TypeMeta, js []byte) (client.Object, error) {
	var doc map[string]any
	if err := json.Unmarshal(js, &doc); err != nil {
		return nil, err
	}
	crdDefaults(tm.Kind, doc)
	js, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	gvk := tm.GroupVersionKind()
	hub, err := s.New(kueue.GroupVersion.WithKind(tm.Kind))
	if err != nil {
		return nil, err
	}
	if gvk.Version == kueue.GroupVersion.Version {
		return hub.(client.Object), json.Unmarshal(js, hub)
	}
	if gvk.Version != kueuev1beta1.GroupVersion.Version {
		return nil, fmt.Errorf("apiVersion %s: want %s or %s", tm.APIVersion, kueue.GroupVersion, kueuev1beta1.GroupVersion)
	}
	old, err := s.New(gvk)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(js, old); err != nil {
		return nil, err
	}
	return hub.(client.Object), s.Convert(old, hub, nil)
}

func loadKueue(paths []string) (*kueueInput, error) {
	s := kueueScheme()
	in := &kueueInput{ignored: map[string]int{}}
	var configDoc []byte
	err := eachDoc(paths, func(path string, tm metav1.TypeMeta, js []byte) error {
		switch tm.Kind {
		case "":
			return nil
		case "Namespace":
			ns := &corev1.Namespace{}
			if err := json.Unmarshal(js, ns); err != nil {
				return fmt.Errorf("%s: Namespace: %w", path, err)
			}
			in.objects = append(in.objects, ns)
		case "PriorityClass":
			pc := &schedulingv1.PriorityClass{}
			if err := json.Unmarshal(js, pc); err != nil {
				return fmt.Errorf("%s: PriorityClass: %w", path, err)
			}
			in.objects = append(in.objects, pc)
		case "Configuration":
			if configDoc != nil {
				return fmt.Errorf("%s: more than one Configuration", path)
			}
			configDoc = js
		case "ResourceFlavor", "ClusterQueue", "Cohort", "LocalQueue", "Workload", "WorkloadPriorityClass":
			obj, err := decodeKueue(s, tm, js)
			if err != nil {
				return fmt.Errorf("%s: %s: %w", path, tm.Kind, err)
			}
			switch o := obj.(type) {
			case *kueue.ResourceFlavor:
				in.flavors = append(in.flavors, o)
			case *kueue.Cohort:
				in.cohorts = append(in.cohorts, o)
			case *kueue.ClusterQueue:
				in.cqs = append(in.cqs, o)
			case *kueue.LocalQueue:
				if o.Namespace == "" {
					o.Namespace = "default"
				}
				in.lqs = append(in.lqs, o)
			case *kueue.Workload:
				if o.Namespace == "" {
					o.Namespace = "default"
				}
				in.workloads = append(in.workloads, o)
			default:
				in.objects = append(in.objects, o)
			}
		default:
			in.ignored[tm.Kind]++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// The configuration file as Kueue's manager reads it: decoded, converted and defaulted
	// by the scheme (pkg/config's fromFile); no document means the defaults.
	if configDoc == nil {
		s.Default(&in.config)
	} else if err := runtime.DecodeInto(serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDecoder(), configDoc, &in.config); err != nil {
		return nil, fmt.Errorf("Configuration: %w", err)
	}
	return in, nil
}

// prepareWorkloads does, on the input workloads, what happens to them before Kueue's scheduler
// sees them: the workload webhook drops minCount without PartialAdmission, the job
// integrations resolve a priority class into spec.priority (Kueue's own lookup, on the fake
// API server), and the workload controller marks a workload holding quota Admitted when no
// admission check is pending. (Feature gates must be set before this runs.)
func prepareWorkloads(ctx context.Context, cl client.Client, wls []*kueue.Workload, now time.Time) error {
	for _, wl := range wls {
		if !features.Enabled(features.PartialAdmission) {
			for i := range wl.Spec.PodSets {
				wl.Spec.PodSets[i].MinCount = nil
			}
		}
		if wl.Spec.Priority == nil {
			var value int32
			var err error
			ref := wl.Spec.PriorityClassRef
			switch {
			case ref != nil && ref.Kind == kueue.WorkloadPriorityClassKind:
				_, value, err = utilpriority.GetPriorityFromWorkloadPriorityClass(ctx, cl, ref.Name)
			case ref != nil:
				_, value, err = utilpriority.GetPriorityFromPriorityClass(ctx, cl, ref.Name)
			default:
				_, value, err = utilpriority.GetPriorityFromPriorityClass(ctx, cl, "")
			}
			if err != nil {
				return fmt.Errorf("workload %s/%s: priority: %w", wl.Namespace, wl.Name, err)
			}
			wl.Spec.Priority = ptr.To(value)
		}
		if workload.HasQuotaReservation(wl) {
			workload.SyncAdmittedCondition(wl, now)
		}
	}
	return nil
}
