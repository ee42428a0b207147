package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// runAdmit runs `oracle admit` as oracle-kueue, the binary build.sh puts beside this one: Kueue
// cannot share a process with the Kubernetes packages linked here (both register a
// "DynamicResourceAllocation" feature gate in the one process-wide registry).
func runAdmit(args []string) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		return 1
	}
	cmd := exec.Command(filepath.Join(filepath.Dir(self), "oracle-kueue"), append([]string{"admit"}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "oracle: oracle-kueue (built by oracle/build.sh):", err)
		return 1
	}
	return 0
}
