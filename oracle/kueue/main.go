// Command oracle-kueue runs Kueue's own scheduler on the inputs `kubeberth admit` reads and
// prints its JSON contract. It is a module of its own because Kueue registers a
// "DynamicResourceAllocation" feature gate of its own in the process-wide gate registry, which
// already holds Kubernetes' gate of that name in the oracle binary (the process panics at
// init). Users run it as `oracle admit`, which execs this binary; it is a test tool, never
// part of kubeberth's runtime.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	yaml3 "sigs.k8s.io/yaml/goyaml.v3"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func usage() {
	fmt.Fprintln(os.Stderr, "usage: oracle admit -f manifests.yaml [-f ...] [--cycles N] [--now RFC3339] [-o json]")
	os.Exit(2)
}

// versions names the Kueue module the binary was built with.
func versions() map[string]any {
	out := map[string]any{}
	if info, ok := debug.ReadBuildInfo(); ok {
		out["go"] = info.GoVersion
		for _, d := range info.Deps {
			if d.Path == "sigs.k8s.io/kueue" || d.Path == "sigs.k8s.io/controller-runtime" {
				out[d.Path] = d.Version
			}
		}
	}
	return out
}

func main() {
	if len(os.Args) < 2 || os.Args[1] != "admit" {
		usage()
	}
	os.Exit(runAdmit(os.Args[2:]))
}

// eachDoc hands fn every non-empty document of the files as JSON, read with YAML 1.2 scalars
// as kubeberth reads them (the oracle's explain input reader does the same).
func eachDoc(paths []string, fn func(path string, tm metav1.TypeMeta, js []byte) error) error {
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dec := yaml3.NewDecoder(bytes.NewReader(data))
		for {
			var tree any
			err := dec.Decode(&tree)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if tree == nil {
				continue
			}
			js, err := json.Marshal(tree)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			var tm metav1.TypeMeta
			if err := json.Unmarshal(js, &tm); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if err := fn(path, tm, js); err != nil {
				return err
			}
		}
	}
	return nil
}
