package main

import (
	"bufio"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/bench/internal/apiserver"
	"github.com/xila-guard/xila-guard/bench/internal/host"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/guardclient"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/app"
	"github.com/xila-guard/xila-guard/components/attest/attester"
	"github.com/xila-guard/xila-guard/components/attest/controller"
	"github.com/xila-guard/xila-guard/components/attest/labtee"
)

const (
	attesterNS = "xila-guard-system"
	// pool labels the nodes, and so the states the controller writes.
	pool = "acme"
	// attestersCommand runs the attesters, in the child process.
	attestersCommand = "attesters"
)

// allowed is the measurement the attesters state and the reference values
// allow.
var allowed = sha512.Sum384([]byte("workload v1"))

func nodeName(i int) string { return fmt.Sprintf("gpu-node-%04d", i) }

// bench is the running system: the API server, the attesters and the
// controller.
type bench struct {
	o         *options
	s         *apiserver.Server
	watcher   client.WithWatch
	gc        *guardclient.Client
	attesters *exec.Cmd
	stdin     io.Closer
	// apiserver and etcd are the pids of the two processes.
	apiserver, etcd int
	challenge       string
	stopController  func()
	// done is closed when the controller ends, with its error in ctrlErr.
	done    chan struct{}
	ctrlErr error
	verify  *verifyBench
	// floorSpec is the spec the baseline writes, an attested state's.
	floorSpec v1alpha1.NodeSecurityStateSpec
}

// setUp starts the API server and the attesters, and creates the nodes
// and their attester pods, running and ready.
func setUp(ctx context.Context, o *options) (*bench, error) {
	s, err := apiserver.Start(o.assets, o.crds, "xila-guard-attest", "attest-bench")
	if err != nil {
		return nil, err
	}
	b := &bench{o: o, s: s, stopController: func() {}}
	ok := false
	defer func() {
		if !ok {
			b.stop()
		}
	}()
	children := host.Children()
	if len(children["kube-apiserver"]) != 1 || len(children["etcd"]) != 1 {
		return nil, fmt.Errorf("want one kube-apiserver and one etcd among this process's children, got %v", children)
	}
	b.apiserver, b.etcd = children["kube-apiserver"][0], children["etcd"][0]
	if b.watcher, err = client.NewWithWatch(s.Config, client.Options{Scheme: s.Guard.Scheme()}); err != nil {
		return nil, err
	}
	if b.gc, err = guardclient.New(s.Config); err != nil {
		return nil, err
	}
	if b.verify, err = newVerifyBench(o.labDir); err != nil {
		return nil, err
	}
	ports, err := b.startAttesters(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := s.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: attesterNS}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i, port := range ports {
		g.Go(func() error { return b.createNode(gctx, nodeName(i), port) })
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("creating the nodes: %w", err)
	}
	ok = true
	return b, nil
}

// createNode creates a node and its attester pod, reported running and
// ready on the loopback address as a kubelet would, serving on port.
func (b *bench) createNode(ctx context.Context, name string, port int) error {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{guard.LabelTenantPool: pool}},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{BootID: "boot-1"}}}
	if _, err := b.s.Kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		return err
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: attesterNS, Name: "attester-" + name, Labels: map[string]string{"app.kubernetes.io/name": "xila-guard-attester"}},
		Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "attester", Image: "xila-guard/attest",
			Ports: []corev1.ContainerPort{{Name: controller.AttesterPortName, ContainerPort: int32(port)}}}}},
	}
	pods := b.s.Kube.CoreV1().Pods(attesterNS)
	pod, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1", PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	return err
}

// startAttesters runs this program's attesters command in a child
// process, so that the attesters' CPU is not the controller's, and returns
// the ports they serve on.
func (b *bench) startAttesters(ctx context.Context) ([]int, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, attestersCommand, "--n="+strconv.Itoa(b.o.nodes), "--lab-dir="+b.o.labDir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	b.attesters, b.stdin = cmd, stdin
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("the attesters did not start: %w", err)
	}
	var ports []int
	for _, f := range strings.Fields(line) {
		p, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("the attesters said %q", line)
		}
		ports = append(ports, p)
	}
	if len(ports) != b.o.nodes {
		return nil, fmt.Errorf("%d attesters started, want %d", len(ports), b.o.nodes)
	}
	return ports, nil
}

// serveAttesters is the child process: n lab attesters, each an attester
// server of its own on a loopback port (one TEE serves one report at a
// time), whose ports it prints on one line. It serves until its standard
// input closes, as it does when the parent ends.
func serveAttesters(args []string) error {
	fs := flag.NewFlagSet(attestersCommand, flag.ContinueOnError)
	n := fs.Int("n", 1, "attesters")
	dir := fs.String("lab-dir", "", "the lab chain")
	if err := fs.Parse(args); err != nil {
		return err
	}
	chain, err := labtee.ReadSecretDir(*dir)
	if err != nil {
		return err
	}
	ports := make([]string, *n)
	for i := range ports {
		srv, err := attester.New(attester.Config{Backend: &attester.Lab{Chain: chain, Measurement: allowed}})
		if err != nil {
			return err
		}
		srv.SetReady(true)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		ports[i] = strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		hs := &http.Server{Handler: srv, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = hs.Serve(ln) }()
	}
	fmt.Println(strings.Join(ports, " "))
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// startController runs the whole controller in this process, as the chart
// runs it under the lab profile (leader election, eight workers), but with
// an interval of an hour so that no refresh runs between the measurements.
// It returns how long after its start every node was Passed.
func (b *bench) startController(ctx context.Context) (time.Duration, error) {
	refs := filepath.Join(b.s.Dir, "reference-values.yaml")
	if err := os.WriteFile(refs, []byte("measurements:\n- {tee: SEV-SNP, measurement: \"sha384:"+hex.EncodeToString(allowed[:])+"\"}\n"), 0o644); err != nil {
		return 0, err
	}
	addr, err := freeAddr()
	if err != nil {
		return 0, err
	}
	o, err := app.ParseControllerFlags([]string{
		"--profile=lab", "--lab-root-file=" + filepath.Join(b.o.labDir, labtee.SecretCertChain), "--reference-values=" + refs,
		"--attester-namespace=" + attesterNS, "--interval=1h", "--challenge-bind-address=" + addr,
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--leader-election-namespace=default",
	}, io.Discard)
	if err != nil {
		return 0, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", b.s.Kubeconfig)
	if err != nil {
		return 0, err
	}
	// As ctrl.GetConfig leaves it in the pod: no client-side rate limit.
	cfg.QPS = -1
	w, err := b.watchPasses(ctx)
	if err != nil {
		return 0, err
	}
	defer w.Stop()
	cctx, cancel := context.WithCancel(ctx)
	b.done = make(chan struct{})
	start := time.Now()
	go func() {
		b.ctrlErr = app.RunControllerWithConfig(cctx, cfg, o, logr.Discard())
		close(b.done)
	}()
	b.stopController = func() { cancel(); <-b.done }
	b.challenge = "http://" + addr + "/v1/challenge/"
	end, err := b.waitPasses(w)
	if err != nil {
		return 0, fmt.Errorf("first attestation of the nodes: %w", err)
	}
	nss, err := b.gc.NodeSecurityState(ctx, nodeName(0))
	if err != nil {
		return 0, err
	}
	b.floorSpec = nss.Spec
	return end.Sub(start), nil
}

// watchPasses watches the states the controller writes from now on.
func (b *bench) watchPasses(ctx context.Context) (watch.Interface, error) {
	var list v1alpha1.NodeSecurityStateList
	if err := b.s.Guard.List(ctx, &list, client.Limit(1)); err != nil {
		return nil, err
	}
	return b.watcher.Watch(ctx, &v1alpha1.NodeSecurityStateList{}, client.MatchingLabels{guard.LabelTenantPool: pool},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
}

// waitPasses waits until states with a Passed verdict were created for
// every node, and returns when the last was seen. It gives up after three
// minutes, or when the controller ends.
func (b *bench) waitPasses(w watch.Interface) (time.Time, error) {
	n := b.o.nodes
	seen := map[string]bool{}
	var last time.Time
	timeout := time.After(3 * time.Minute)
	for len(seen) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return last, errors.New("the watch of the states ended")
			}
			if nss, ok := ev.Object.(*v1alpha1.NodeSecurityState); ok && ev.Type == watch.Added && passed(nss) {
				seen[nss.Name], last = true, time.Now()
			}
		case <-b.done:
			return last, fmt.Errorf("the controller ended: %v", b.ctrlErr)
		case <-timeout:
			return last, fmt.Errorf("%d of %d nodes Passed after 3m", len(seen), n)
		}
	}
	return last, nil
}

func passed(nss *v1alpha1.NodeSecurityState) bool {
	tee := nss.Spec.TEE
	return tee != nil && tee.Attestation != nil && tee.Attestation.Verdict == v1alpha1.AttestationPassed
}

func (b *bench) stop() {
	b.stopController()
	if b.attesters != nil {
		b.stdin.Close()
		_ = b.attesters.Wait()
	}
	b.s.Stop()
}

// freeAddr returns a loopback address nothing listens on now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
