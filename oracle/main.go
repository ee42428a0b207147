// Command oracle runs upstream's own code (kube-scheduler's framework and in-tree plugins) on
// the inputs kubeberth's commands read and prints kubeberth's output contracts, so tests can
// compare the two. It is a test and benchmark tool, never part of kubeberth's runtime.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

// gateDefaults: preemption runs synchronously so that its victims are known when PostFilter
// returns (explain applies each decision before the next pod), and no cross-cycle batching
// hints (explain attempts each pod once, independently).
var gateDefaults = map[string]bool{"SchedulerAsyncPreemption": false, "OpportunisticBatching": false}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: oracle explain -f manifests.yaml [-f ...] [--config sched.yaml] [--hints choices.json] [--feature-gates A=true,B=false] [-o json]\n       oracle deschedule -f manifests.yaml [-f ...] --policy policy.yaml [--now RFC3339] [-o json]\n       oracle admit -f manifests.yaml [-f ...] [--cycles N] [--now RFC3339] [-o json]\n       oracle cluster --data-dir DIR [--port P] [--token-file F] [--apiserver-arg=--flag=value ...]\n       oracle kube-scheduler [kube-scheduler flags]\n       oracle kube-controller-manager [kube-controller-manager flags]\n       oracle kwok --kubeconfig F [kwok flags]\n       oracle version")
	os.Exit(2)
}

func versions() map[string]any {
	out := map[string]any{}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return out
	}
	out["go"] = info.GoVersion
	for _, d := range info.Deps {
		if d.Path == "k8s.io/kubernetes" || d.Path == "sigs.k8s.io/kueue" || d.Path == "sigs.k8s.io/descheduler" || d.Path == "sigs.k8s.io/kwok" {
			v := d.Version
			if d.Replace != nil {
				v = d.Replace.Version
			}
			out[d.Path] = v
		}
	}
	return out
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "version":
		b, _ := json.MarshalIndent(versions(), "", "  ")
		fmt.Println(string(b))
	case "explain":
		os.Exit(runExplain(os.Args[2:]))
	case "deschedule":
		os.Exit(runDeschedule(os.Args[2:]))
	case "admit":
		os.Exit(runAdmit(os.Args[2:]))
	case "cluster":
		os.Exit(runCluster(os.Args[2:]))
	case "kube-scheduler":
		os.Exit(runKubeScheduler(os.Args[2:]))
	case "kube-controller-manager":
		os.Exit(runKubeControllerManager(os.Args[2:]))
	case "kwok":
		os.Exit(runKwok(os.Args[2:]))
	default:
		usage()
	}
}

func setGates(spec string) error {
	gates := map[string]bool{}
	known := utilfeature.DefaultMutableFeatureGate.GetAll()
	for k, v := range gateDefaults {
		if _, ok := known[featuregate.Feature(k)]; ok {
			gates[k] = v
		}
	}
	for _, kv := range strings.Split(spec, ",") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || (v != "true" && v != "false") {
			return fmt.Errorf("feature gate %q: want Name=true|false", kv)
		}
		gates[k] = v == "true"
	}
	return utilfeature.DefaultMutableFeatureGate.SetFromMap(gates)
}

func runExplain(args []string) int {
	fs := flag.NewFlagSet("explain", flag.ExitOnError)
	var files multi
	fs.Var(&files, "f", "manifests file (repeatable)")
	cfgPath := fs.String("config", "", "KubeSchedulerConfiguration file")
	hintsPath := fs.String("hints", "", "JSON {pod: node}: the node to take among equally good ones")
	gates := fs.String("feature-gates", "", "extra feature gates, Name=true|false,...")
	output := fs.String("o", "json", "output format (json only)")
	_ = fs.Parse(args)
	if len(files) == 0 || *output != "json" {
		usage()
	}
	// klog is upstream's logger; keep stderr for real errors only.
	flags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(flags)
	_ = flags.Set("logtostderr", "false")
	_ = flags.Set("stderrthreshold", "ERROR")
	klog.SetOutput(io.Discard)
	if err := setGates(*gates); err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		return 2
	}
	hints := map[string]string{}
	if *hintsPath != "" {
		data, err := os.ReadFile(*hintsPath)
		if err == nil {
			err = json.Unmarshal(data, &hints)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "oracle: hints:", err)
			return 2
		}
	}
	c, err := loadManifests(files)
	if err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		return 1
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		return 1
	}
	if len(cfg.Extenders) > 0 {
		fmt.Fprintln(os.Stderr, "oracle: extenders are not supported")
		return 1
	}
	metrics.Register() // the cache and framework record metrics unconditionally
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, err := explain(ctx, c, cfg, hints)
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
