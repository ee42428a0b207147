package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/core/install"       // v1 Pod/Node defaulting, as the API server applies it
	_ "k8s.io/kubernetes/pkg/apis/policy/install"     // PDB defaulting
	_ "k8s.io/kubernetes/pkg/apis/resource/install"   // DRA defaulting (allocationMode, count)
	_ "k8s.io/kubernetes/pkg/apis/scheduling/install" // PriorityClass defaulting (preemptionPolicy)
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	yaml3 "sigs.k8s.io/yaml/goyaml.v3"
)

// cluster is what the manifests hold, with the API server's defaulting and the Priority
// admission plugin already applied (kube-scheduler only ever sees admitted objects).
type cluster struct {
	nodes      []*v1.Node
	bound      []*v1.Pod
	pending    []*v1.Pod
	pdbs       []*policyv1.PodDisruptionBudget
	namespaces []*v1.Namespace
	classes    []*schedulingv1.PriorityClass
	allPods    []*v1.Pod // every pod, any phase (the descheduler sees them all)
	// DRA objects (DeviceClass, ResourceSlice, ResourceClaim), with the claims the resource
	// claim controller would generate from templates for the pods.
	dra     []runtime.Object
	ignored map[string]int
}

// creationBase gives manifest order as creation order (the queue's arrival tie-break).
var creationBase = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

func loadManifests(paths []string) (*cluster, error) {
	c := &cluster{ignored: map[string]int{}}
	var pods []*v1.Pod
	templates := map[string]*resourcev1.ResourceClaimTemplate{}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			// YAML 1.2 scalars, as PyYAML writes them and kubeberth reads them (YAML 1.1's
			// y/n/on/off booleans would turn a node named "n" into false).
			var tree any
			if err := yaml3.Unmarshal(doc, &tree); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			if tree == nil {
				continue
			}
			js, err := json.Marshal(tree)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			var tm metav1.TypeMeta
			if err := json.Unmarshal(js, &tm); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			var obj runtime.Object
			switch tm.Kind {
			case "":
				continue
			case "Node":
				obj = &v1.Node{}
			case "Pod":
				obj = &v1.Pod{}
			case "PodDisruptionBudget":
				obj = &policyv1.PodDisruptionBudget{}
			case "Namespace":
				obj = &v1.Namespace{}
			case "PriorityClass":
				obj = &schedulingv1.PriorityClass{}
			case "DeviceClass":
				obj = &resourcev1.DeviceClass{}
			case "ResourceSlice":
				obj = &resourcev1.ResourceSlice{}
			case "ResourceClaim":
				obj = &resourcev1.ResourceClaim{}
			case "ResourceClaimTemplate":
				obj = &resourcev1.ResourceClaimTemplate{}
			default:
				c.ignored[tm.Kind]++
				continue
			}
			if err := json.Unmarshal(js, obj); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", path, tm.Kind, err)
			}
			legacyscheme.Scheme.Default(obj)
			switch o := obj.(type) {
			case *v1.Node:
				c.nodes = append(c.nodes, o)
			case *v1.Pod:
				pods = append(pods, o)
			case *policyv1.PodDisruptionBudget:
				if o.Namespace == "" {
					o.Namespace = "default"
				}
				c.pdbs = append(c.pdbs, o)
			case *v1.Namespace:
				c.namespaces = append(c.namespaces, o)
			case *schedulingv1.PriorityClass:
				c.classes = append(c.classes, o)
			case *resourcev1.ResourceClaim:
				if o.Namespace == "" {
					o.Namespace = "default"
				}
				c.dra = append(c.dra, o)
			case *resourcev1.ResourceClaimTemplate:
				if o.Namespace == "" {
					o.Namespace = "default"
				}
				templates[o.Namespace+"/"+o.Name] = o
			case *resourcev1.DeviceClass, *resourcev1.ResourceSlice:
				c.dra = append(c.dra, o)
			}
		}
	}
	nodeNames := map[string]bool{}
	for _, n := range c.nodes {
		nodeNames[n.Name] = true
		n.UID = types.UID("node/" + n.Name)
	}
	for seq, p := range pods {
		if p.Namespace == "" {
			p.Namespace = "default"
		}
		p.UID = types.UID(p.Namespace + "/" + p.Name)
		if p.CreationTimestamp.IsZero() {
			p.CreationTimestamp = metav1.NewTime(creationBase.Add(time.Duration(seq) * time.Second))
		}
		if err := admitPriority(p, c.classes); err != nil {
			return nil, err
		}
		c.dra = append(c.dra, generateClaims(p, templates)...)
		c.allPods = append(c.allPods, p)
		if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		if p.Spec.NodeName != "" {
			if nodeNames[p.Spec.NodeName] {
				c.bound = append(c.bound, p)
			}
			continue
		}
		c.pending = append(c.pending, p)
	}
	return c, nil
}

// admitPriority does what the Priority admission plugin does on pod creation: resolve
// priorityClassName (or the global default class) into spec.priority and preemptionPolicy.
func admitPriority(p *v1.Pod, classes []*schedulingv1.PriorityClass) error {
	if p.Spec.Priority != nil && p.Spec.PriorityClassName == "" {
		return nil
	}
	builtin := map[string]int32{"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}
	var found *schedulingv1.PriorityClass
	for _, pc := range classes {
		if (p.Spec.PriorityClassName != "" && pc.Name == p.Spec.PriorityClassName) ||
			(p.Spec.PriorityClassName == "" && pc.GlobalDefault) {
			found = pc
			break
		}
	}
	var value int32
	switch {
	case found != nil:
		value = found.Value
		if found.PreemptionPolicy != nil && p.Spec.PreemptionPolicy == nil {
			pp := *found.PreemptionPolicy
			p.Spec.PreemptionPolicy = &pp
		}
	case builtin[p.Spec.PriorityClassName] != 0:
		value = builtin[p.Spec.PriorityClassName]
	case p.Spec.PriorityClassName != "":
		return fmt.Errorf("pod %s/%s: no PriorityClass %q", p.Namespace, p.Name, p.Spec.PriorityClassName)
	}
	if p.Spec.Priority == nil {
		p.Spec.Priority = &value
	}
	return nil
}

const emptyConfig = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"

// loadConfig decodes a KubeSchedulerConfiguration with kube-scheduler's own scheme, which
// applies upstream's defaulting (default plugins, plugin args) and converts to the internal type.
func loadConfig(path string) (*config.KubeSchedulerConfiguration, error) {
	data := []byte(emptyConfig)
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return nil, err
		}
	}
	obj, gvk, err := scheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	cfg, ok := obj.(*config.KubeSchedulerConfiguration)
	if !ok {
		return nil, fmt.Errorf("%s: %v is not a KubeSchedulerConfiguration", path, gvk)
	}
	return cfg, nil
}

// generateClaims does what the resource claim controller does for a pod's claims from templates:
// a claim named <pod>-<entry> (kubeberth's deterministic name) recorded in the pod's status.
func generateClaims(p *v1.Pod, templates map[string]*resourcev1.ResourceClaimTemplate) []runtime.Object {
	var out []runtime.Object
	for _, entry := range p.Spec.ResourceClaims {
		if entry.ResourceClaimTemplateName == nil {
			continue
		}
		tpl := templates[p.Namespace+"/"+*entry.ResourceClaimTemplateName]
		if tpl == nil {
			continue
		}
		name := p.Name + "-" + entry.Name
		yes := true
		out = append(out, &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.Namespace,
				UID: types.UID("claim/" + p.Namespace + "/" + name),
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod",
					Name: p.Name, UID: p.UID, Controller: &yes, BlockOwnerDeletion: &yes}}},
			Spec: *tpl.Spec.Spec.DeepCopy(),
		})
		p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses,
			v1.PodResourceClaimStatus{Name: entry.Name, ResourceClaimName: &name})
	}
	return out
}

// waitForDRA waits until the DRA manager sees every DeviceClass, ResourceSlice and
// ResourceClaim of the input: its slice tracker and claim cache fill asynchronously after the
// informers sync, and a pod scheduled before that would find no devices.
func waitForDRA(ctx context.Context, m fwk.SharedDRAManager, c *cluster) error {
	var classes, slices, allocated int
	var claims []*resourcev1.ResourceClaim
	for _, o := range c.dra {
		switch v := o.(type) {
		case *resourcev1.DeviceClass:
			classes++
		case *resourcev1.ResourceSlice:
			slices++
		case *resourcev1.ResourceClaim:
			claims = append(claims, v)
			if v.Status.Allocation != nil {
				for _, r := range v.Status.Allocation.Devices.Results {
					if r.ShareID == nil && (r.AdminAccess == nil || !*r.AdminAccess) {
						allocated++
					}
				}
			}
		}
	}
	if m == nil || len(c.dra) == 0 {
		return nil
	}
	return wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true,
		func(context.Context) (bool, error) {
			dc, err := m.DeviceClasses().List()
			if err != nil || len(dc) < classes {
				return false, nil
			}
			rs, err := m.ResourceSlices().ListWithDeviceTaintRules()
			if err != nil || len(rs) < slices {
				return false, nil
			}
			for _, claim := range claims {
				if _, err := m.ResourceClaims().Get(claim.Namespace, claim.Name); err != nil {
					return false, nil
				}
			}
			// The allocated-device tracker follows the claims through its own event handler.
			inUse, err := m.ResourceClaims().ListAllAllocatedDevices()
			return err == nil && inUse.Len() >= allocated, nil
		})
}
