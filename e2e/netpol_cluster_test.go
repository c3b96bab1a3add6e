//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
)

// The conformance model: namespaces x, y, z, each with pods a, b, c that
// serve TCP and UDP on 80 and 81 (agnhost netexec, one container per port)
// and one Service per pod.
var (
	modelNamespaces = []string{"x", "y", "z"}
	modelPods       = []string{"a", "b", "c"}
	modelPorts      = []modelPort{{"tcp", 80}, {"tcp", 81}, {"udp", 80}, {"udp", 81}}
)

type modelPort struct {
	proto string // tcp or udp
	port  int32
}

func (p modelPort) String() string { return fmt.Sprintf("%s/%d", p.proto, p.port) }

func (p modelPort) protocol() corev1.Protocol {
	if p.proto == "udp" {
		return corev1.ProtocolUDP
	}
	return corev1.ProtocolTCP
}

// podRef names a model pod, e.g. {"x", "a"}.
type podRef struct{ ns, name string }

func (r podRef) String() string { return r.ns + "/" + r.name }

// model is the live model cluster.
type model struct {
	cs     kubernetes.Interface
	suffix string            // real namespace = model name + suffix
	nodes  map[podRef]string // kind node container of each pod
	netns  map[podRef]string // network namespace path on that node
	ips    map[podRef]string // pod IP
	order  []podRef          // x/a, x/b, ..., z/c
	// retried counts probes xg-probe ran twice because it was itself
	// starved of CPU while they timed out.
	retried int
}

func (m *model) ns(name string) string { return name + m.suffix }

// setUpModel creates the namespaces, pods and Services, spreading the pods
// over both workers, and waits until every pod is Ready.
func setUpModel(ctx context.Context, t *testing.T, cfg *envconf.Config) *model {
	t.Helper()
	cs := clientset(t, cfg)
	workers := workerNames(ctx, t, cs)
	if len(workers) < 2 {
		t.Fatalf("need 2 workers, cluster has %v", workers)
	}
	m := &model{cs: cs, suffix: "-" + envconf.RandomName("np", 8), nodes: map[podRef]string{},
		netns: map[podRef]string{}, ips: map[podRef]string{}}
	for _, ns := range modelNamespaces {
		obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: m.ns(ns), Labels: map[string]string{"ns": ns}}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating namespace %s: %v", obj.Name, err)
		}
	}
	i := 0
	for _, ns := range modelNamespaces {
		for _, name := range modelPods {
			ref := podRef{ns, name}
			m.order = append(m.order, ref)
			m.nodes[ref] = workers[i%2]
			i++
			if _, err := cs.CoreV1().Pods(m.ns(ns)).Create(ctx, modelPod(name, m.nodes[ref]), metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating pod %s: %v", ref, err)
			}
			if _, err := cs.CoreV1().Services(m.ns(ns)).Create(ctx, modelService(name), metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating service for %s: %v", ref, err)
			}
		}
	}
	for _, ref := range m.order {
		p := waitRunning(ctx, t, cs, m.ns(ref.ns), ref.name)
		m.ips[ref] = p.Status.PodIP
		m.netns[ref] = podNetNS(ctx, t, m.nodes[ref], m.ns(ref.ns), ref.name)
	}
	return m
}

// modelPod is a pod serving TCP and UDP on 80 and 81, with the named ports
// serve-<port>-<proto>.
func modelPod(name, node string) *corev1.Pod {
	var containers []corev1.Container
	for _, port := range []int32{80, 81} {
		containers = append(containers, corev1.Container{
			Name:            fmt.Sprintf("serve-%d", port),
			Image:           suite.Agnhost,
			ImagePullPolicy: corev1.PullNever,
			Args:            []string{"netexec", fmt.Sprintf("--http-port=%d", port), fmt.Sprintf("--udp-port=%d", port)},
			Ports: []corev1.ContainerPort{
				{Name: fmt.Sprintf("serve-%d-tcp", port), ContainerPort: port, Protocol: corev1.ProtocolTCP},
				{Name: fmt.Sprintf("serve-%d-udp", port), ContainerPort: port, Protocol: corev1.ProtocolUDP},
			},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)},
			}, PeriodSeconds: 2},
		})
	}
	zero := int64(0)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pod": name}},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{"kubernetes.io/hostname": node},
			TerminationGracePeriodSeconds: &zero,
			Containers:                    containers,
		},
	}
}

func modelService(name string) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "s-" + name},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"pod": name}},
	}
	for _, p := range modelPorts {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
			Name: fmt.Sprintf("%s-%d", p.proto, p.port), Protocol: p.protocol(), Port: p.port, TargetPort: intstr.FromInt32(p.port),
		})
	}
	return svc
}

// serviceName is the DNS name of a model pod's Service.
func (m *model) serviceName(ref podRef) string {
	return fmt.Sprintf("s-%s.%s.svc.cluster.local", ref.name, m.ns(ref.ns))
}

// podNetNS finds a pod's network namespace on its node through the CRI.
func podNetNS(ctx context.Context, t *testing.T, node, ns, name string) string {
	t.Helper()
	var path string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		id, err := dockerExec(ctx, node, nil, "crictl", "pods", "-q", "--state", "ready", "--namespace", ns, "--name", "^"+name+"$")
		id = strings.TrimSpace(id)
		if err != nil || id == "" || strings.Contains(id, "\n") {
			return false, nil
		}
		out, err := dockerExec(ctx, node, nil, "crictl", "inspectp", id)
		if err != nil {
			return false, nil
		}
		var info struct {
			Info struct {
				RuntimeSpec struct {
					Linux struct {
						Namespaces []struct{ Type, Path string }
					}
				}
			}
		}
		if err := json.Unmarshal([]byte(out), &info); err != nil {
			return false, nil
		}
		for _, n := range info.Info.RuntimeSpec.Linux.Namespaces {
			if n.Type == "network" && n.Path != "" {
				path = n.Path
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("finding the network namespace of %s/%s on %s: %v", ns, name, node, err)
	}
	return path
}

// dockerExec runs a command in a kind node container.
func dockerExec(ctx context.Context, node string, stdin []byte, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", append([]string{"exec", "-i", node}, args...)...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("docker exec %s %s: %w: %s", node, strings.Join(args, " "), err, stderr.String())
	}
	return out.String(), nil
}

// installProbe builds xg-probe and copies it onto every worker.
func installProbe(ctx context.Context, t *testing.T, workers []string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "xg-probe")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/xg-probe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building xg-probe: %v\n%s", err, out)
	}
	for _, w := range workers {
		if out, err := exec.CommandContext(ctx, "docker", "cp", bin, w+":/usr/local/bin/xg-probe").CombinedOutput(); err != nil {
			t.Fatalf("copying xg-probe to %s: %v\n%s", w, err, out)
		}
	}
}

// probeKey identifies one probe of a round.
type probeKey struct {
	src, dst podRef
	port     modelPort
	viaSvc   bool
}

func (k probeKey) String() string {
	via := "ip"
	if k.viaSvc {
		via = "svc"
	}
	return fmt.Sprintf("%s -> %s %s (%s)", k.src, k.dst, k.port, via)
}

// probeAll runs every probe of the model once, in parallel: 81 pairs, four
// ports, by pod IP and by Service name.
func (m *model) probeAll(ctx context.Context) (map[probeKey]bool, error) {
	got, _, err := m.probeAllWhy(ctx)
	return got, err
}

// probeAllWhy is probeAll that also returns, for each probe that did not
// connect, what xg-probe saw (a timeout, a refusal, a netns error).
func (m *model) probeAllWhy(ctx context.Context) (map[probeKey]bool, map[probeKey]string, error) {
	type wire struct {
		ID       int    `json:"id"`
		NetNS    string `json:"netns"`
		Protocol string `json:"protocol"`
		Host     string `json:"host"`
		Port     int32  `json:"port"`
	}
	byNode := map[string][]wire{}
	var keys []probeKey
	for _, src := range m.order {
		for _, dst := range m.order {
			for _, p := range modelPorts {
				for _, viaSvc := range []bool{false, true} {
					host := m.ips[dst]
					if viaSvc {
						host = m.serviceName(dst)
					}
					byNode[m.nodes[src]] = append(byNode[m.nodes[src]], wire{ID: len(keys), NetNS: m.netns[src], Protocol: p.proto, Host: host, Port: p.port})
					keys = append(keys, probeKey{src, dst, p, viaSvc})
				}
			}
		}
	}
	got := make(map[probeKey]bool, len(keys))
	why := map[probeKey]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, len(byNode))
	for node, probes := range byNode {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in, _ := json.Marshal(probes)
			out, err := dockerExec(ctx, node, in, "xg-probe", "--timeout=1s")
			if err != nil {
				errs <- err
				return
			}
			var res struct {
				MaxStall time.Duration `json:"maxStall"`
				Results  []struct {
					ID        int    `json:"id"`
					Connected bool   `json:"connected"`
					Error     string `json:"error"`
					Retried   bool   `json:"retried"`
				} `json:"results"`
			}
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				errs <- fmt.Errorf("xg-probe on %s: %w", node, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, r := range res.Results {
				k := keys[r.ID]
				got[k] = r.Connected
				if r.Retried {
					m.retried++
				}
				if !r.Connected {
					attempts := "once"
					if r.Retried {
						attempts = "twice"
					}
					why[k] = fmt.Sprintf("%s (tried %s; the prober on %s stalled for at most %s)",
						r.Error, attempts, node, res.MaxStall.Round(time.Millisecond))
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return nil, nil, err
	}
	return got, why, nil
}

// setLabels makes an object's labels exactly want.
func setPodLabels(ctx context.Context, cs kubernetes.Interface, ns, name string, want map[string]string) error {
	return retryConflict(ctx, func() error {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if maps.Equal(p.Labels, want) {
			return nil
		}
		p.Labels = want
		_, err = cs.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{})
		return err
	})
}

func setNamespaceLabels(ctx context.Context, cs kubernetes.Interface, name string, want map[string]string) error {
	return retryConflict(ctx, func() error {
		n, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		want = maps.Clone(want)
		want["kubernetes.io/metadata.name"] = name
		if maps.Equal(n.Labels, want) {
			return nil
		}
		n.Labels = want
		_, err = cs.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

func retryConflict(ctx context.Context, fn func() error) error {
	for i := 0; ; i++ {
		err := fn()
		if !apierrors.IsConflict(err) || i == 5 {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// sortedKeys lists probe keys in a stable order for messages.
func sortedKeys(ks []probeKey) []string {
	out := make([]string, 0, len(ks))
	for _, k := range ks {
		out = append(out, k.String())
	}
	slices.Sort(out)
	return out
}
