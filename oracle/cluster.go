package main

// `oracle cluster`: etcd and the real kube-apiserver in this process, on loopback, for the
// real-cluster tests (tests/realcluster) and bench/peer.py. `oracle kube-scheduler` and
// `oracle kube-controller-manager`: the real commands with their own flags. All only call
// upstream's code; the wiring is ours.

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/server/v3/embed"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	basecompatibility "k8s.io/component-base/compatibility"
	logsapi "k8s.io/component-base/logs/api/v1"
	apiserverapp "k8s.io/kubernetes/cmd/kube-apiserver/app"
	apiserveroptions "k8s.io/kubernetes/cmd/kube-apiserver/app/options"
	controllermanagerapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	schedulerapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

// clusterInfo is the one JSON line `oracle cluster` prints once the servers listen (not yet
// ready: callers poll /readyz).
type clusterInfo struct {
	Server     string `json:"server"`
	Kubeconfig string `json:"kubeconfig"`
	Etcd       string `json:"etcd"`
	Token      string `json:"token"`
	PID        int    `json:"pid"`
}

func runCluster(args []string) int {
	fs := flag.NewFlagSet("cluster", flag.ExitOnError)
	dataDir := fs.String("data-dir", "", "directory for etcd's data, the generated keys and the kubeconfig (required)")
	port := fs.Int("port", 0, "kube-apiserver's port on 127.0.0.1 (0: a free one the kernel picks)")
	tokenFile := fs.String("token-file", "", "static token CSV (token,user,uid,\"group1,group2\"); default: one system:masters admin token generated into the data dir. The kubeconfig uses its first row")
	var extra multi
	fs.Var(&extra, "apiserver-arg", "one more kube-apiserver flag, e.g. --apiserver-arg=--feature-gates=A=true (repeatable)")
	_ = fs.Parse(args)
	if *dataDir == "" || fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: oracle cluster --data-dir DIR [--port P] [--token-file F] [--apiserver-arg=--flag=value ...]")
		return 2
	}
	if err := serveCluster(*dataDir, *port, *tokenFile, extra); err != nil {
		fmt.Fprintln(os.Stderr, "oracle cluster:", err)
		return 1
	}
	return 0
}

func serveCluster(dataDir string, port int, tokenFile string, extra []string) error {
	dir, err := filepath.Abs(dataDir)
	if err != nil {
		return err
	}
	pki := filepath.Join(dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return err
	}
	caFile, certFile, keyFile, err := servingCert(pki)
	if err != nil {
		return fmt.Errorf("serving certificate: %w", err)
	}
	saKey := filepath.Join(pki, "service-account.key")
	if err := writeSAKey(saKey); err != nil {
		return fmt.Errorf("service account key: %w", err)
	}
	if tokenFile == "" {
		tokenFile = filepath.Join(dir, "tokens.csv")
		if err := writeAdminToken(tokenFile); err != nil {
			return err
		}
	}
	token, user, err := firstToken(tokenFile)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	etcd, err := startEtcd(filepath.Join(dir, "etcd"))
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	defer etcd.Close()
	etcdURL := "http://" + etcd.Clients[0].Addr().String()

	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("kube-apiserver listener: %w", err)
	}
	bound := ln.Addr().(*net.TCPAddr).Port
	server := "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(bound))

	// Two admission plugins expect components a test cluster may not run: ServiceAccount
	// refuses pods until kube-controller-manager has made the namespace's "default"
	// ServiceAccount, and TaintNodesByCondition taints every new node not-ready until its
	// kubelet reports Ready and the node lifecycle controller lifts the taint (no kubelets).
	flags := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--tls-cert-file=" + certFile,
		"--tls-private-key-file=" + keyFile,
		"--token-auth-file=" + tokenFile,
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + saKey,
		"--service-account-signing-key-file=" + saKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
	}
	opts := apiserveroptions.NewServerRunOptions()
	pfs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	for _, f := range opts.Flags().FlagSets {
		pfs.AddFlagSet(f)
	}
	if err := pfs.Parse(append(flags, extra...)); err != nil {
		return fmt.Errorf("kube-apiserver flags: %w", err)
	}
	opts.SecureServing.Listener = ln
	opts.SecureServing.BindPort = bound
	registry := opts.GenericServerRunOptions.ComponentGlobalsRegistry
	if err := registry.Set(); err != nil {
		return err
	}
	rest.SetDefaultWarningHandler(rest.NoWarnings{})
	if err := logsapi.ValidateAndApply(opts.Logs, registry.FeatureGateFor(basecompatibility.DefaultKubeComponent)); err != nil {
		return err
	}
	completed, err := opts.Complete(ctx)
	if err != nil {
		return err
	}
	if errs := completed.Validate(); len(errs) != 0 {
		return utilerrors.NewAggregate(errs)
	}

	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, server, caFile, user, token); err != nil {
		return err
	}
	info, _ := json.Marshal(clusterInfo{Server: server, Kubeconfig: kubeconfig, Etcd: etcdURL,
		Token: token, PID: os.Getpid()})
	fmt.Println(string(info))

	done := make(chan error, 1)
	go func() { done <- apiserverapp.Run(ctx, completed) }()
	select {
	case err := <-done: // it could not start
		return err
	case <-ctx.Done():
	}
	// SIGTERM: kube-apiserver's own graceful shutdown, bounded. A client still watching holds
	// it for the whole request timeout (a minute); a throwaway test cluster need not wait.
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	case <-time.After(shutdownGrace):
		fmt.Fprintf(os.Stderr, "oracle cluster: kube-apiserver still draining after %s (clients watching); stopping\n", shutdownGrace)
	}
	return nil
}

const shutdownGrace = 5 * time.Second

func startEtcd(dir string) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	cfg.UnsafeNoFsync = true // a throwaway test cluster: no durability wanted, fsync is the slow part
	loop := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls = []url.URL{loop}
	cfg.AdvertiseClientUrls = []url.URL{loop}
	cfg.ListenPeerUrls = []url.URL{loop}
	cfg.AdvertisePeerUrls = []url.URL{loop}
	cfg.InitialCluster = cfg.Name + "=" + loop.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, err
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, errors.New("not ready after 60s")
	}
}

// servingCert makes a CA and a serving certificate for 127.0.0.1/localhost with client-go's
// helper, writing the CA apart for the kubeconfig.
func servingCert(pki string) (ca, cert, key string, err error) {
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1",
		[]net.IP{net.ParseIP("127.0.0.1")}, []string{"localhost"})
	if err != nil {
		return "", "", "", err
	}
	// The bundle is the serving certificate followed by its CA.
	var blocks [][]byte
	for rest := certPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		blocks = append(blocks, pem.EncodeToMemory(b))
	}
	if len(blocks) < 2 {
		return "", "", "", errors.New("self-signed bundle without its CA")
	}
	ca, cert, key = filepath.Join(pki, "ca.crt"), filepath.Join(pki, "serving.crt"), filepath.Join(pki, "serving.key")
	for path, data := range map[string][]byte{ca: blocks[len(blocks)-1], cert: certPEM, key: keyPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return "", "", "", err
		}
	}
	return ca, cert, key, nil
}

func writeSAKey(path string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	data, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

func writeAdminToken(path string) error {
	raw := make([]byte, 16)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	line := hex.EncodeToString(raw) + ",admin,admin,\"system:masters\"\n"
	return os.WriteFile(path, []byte(line), 0o600)
}

func firstToken(path string) (token, user string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	rec, err := r.Read()
	if err != nil || len(rec) < 3 || rec[0] == "" {
		return "", "", fmt.Errorf("%s: line 1: want token,user,uid[,\"groups\"]", path)
	}
	return rec[0], rec[1], nil
}

func writeKubeconfig(path, server, caFile, user, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["oracle"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: caFile}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["oracle"] = &clientcmdapi.Context{Cluster: "oracle", AuthInfo: user}
	cfg.CurrentContext = "oracle"
	return clientcmd.WriteToFile(*cfg, path)
}

// runKubeScheduler is kube-scheduler's own command with its own flags.
func runKubeScheduler(args []string) int {
	cmd := schedulerapp.NewSchedulerCommand()
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		return 1
	}
	return 0
}

// runKubeControllerManager is kube-controller-manager's own command with its own flags: the
// controllers a real cluster runs beside the API server (ReplicaSets, Deployments, the
// disruption controller's PodDisruptionBudget status, garbage collection, namespaces).
func runKubeControllerManager(args []string) int {
	cmd := controllermanagerapp.NewControllerManagerCommand()
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		return 1
	}
	return 0
}
