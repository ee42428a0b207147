package main

// `oracle kwok`: KWOK's controller (sigs.k8s.io/kwok's own `kwok` command), which plays the
// kubelet of every fake node on a cluster without kubelets (`oracle cluster`): nodes become
// Ready, bound pods Running, deleted pods go for good. It runs with the stages kwokctl gives it
// by default, since the kwok command alone has none.

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeatwithlease "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
	kwokconfig "sigs.k8s.io/kwok/pkg/config"
	kwokcmd "sigs.k8s.io/kwok/pkg/kwok/cmd"
	kwoklog "sigs.k8s.io/kwok/pkg/log"
	"sigs.k8s.io/kwok/pkg/utils/signals"
)

// kwokStages are kwokctl's default stages for a cluster with node leases
// (pkg/kwokctl/runtime's getDefaultNodeStages and getDefaultPodStages): node initialisation
// (Ready, addresses, capacity kept as created), the ten-minute status heartbeat, and the pod
// stages that make a bound pod Running, finish a pod whose containers all exited, and delete a
// terminating pod.
var kwokStages = []string{
	nodefast.DefaultNodeInit,
	nodeheartbeatwithlease.DefaultNodeHeartbeatWithLease,
	podfast.DefaultPodReady,
	podfast.DefaultPodComplete,
	podfast.DefaultPodDelete,
}

// runKwok is kwok's main with kwokctl's default stages added to its configuration. kwok reads
// its configuration files from os.Args while it builds its context, before the command parses
// its flags, so the stages go there as one more --config file (removed on exit).
func runKwok(args []string) int {
	stages, err := os.CreateTemp("", "oracle-kwok-stages-*.yaml")
	if err != nil {
		fmt.Fprintln(os.Stderr, "oracle kwok:", err)
		return 1
	}
	defer os.Remove(stages.Name())
	_, err = stages.WriteString(strings.Join(kwokStages, "\n---\n"))
	if cerr := stages.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "oracle kwok:", err)
		return 1
	}
	os.Args = append([]string{"oracle kwok", "--config=" + stages.Name()}, args...)

	global := pflag.NewFlagSet("global", pflag.ContinueOnError)
	global.ParseErrorsAllowlist.UnknownFlags = true
	global.Usage = func() {}
	ctx := signals.SetupSignalContext()
	ctx, logger := kwoklog.InitFlags(ctx, global)
	ctx, err = kwokconfig.InitFlags(ctx, global)
	if err != nil {
		logger.Error("Init config flags", "err", err)
		return 1
	}
	command := kwokcmd.NewCommand(ctx)
	// k8s.io/component-base's verflag (linked in with the kube commands) puts a --version flag
	// of its own type into pflag's global set, which cobra adds to every root command; cobra's
	// boolean --version, which kwok's command asks for, would then fail to parse. `oracle
	// version` gives the versions instead.
	command.Version = ""
	command.PersistentFlags().AddFlagSet(global)
	command.SetArgs(os.Args[1:])
	if err := command.ExecuteContext(ctx); err != nil {
		logger.Error("Execute exit", "err", err)
		return 1
	}
	return 0
}
