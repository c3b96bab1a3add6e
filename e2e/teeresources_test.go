//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/xila-guard/xila-guard/e2e/lab"
)

const (
	// labEPCSize is the EPC size the lab attesters state
	// (confidential.attester.lab.epcSize in attest-values.yaml), 64 MiB.
	labEPCSize = 64 << 20
	// enclaveLimit is the chart's default confidential.teeResources.enclaveLimit.
	enclaveLimit = 20
	// epcRequest is what each of two tenant pods asks for: 0.6 of the
	// node's EPC, so that both do not fit.
	epcRequest = labEPCSize * 6 / 10
	// kubeletRestarts is how many times the attested worker's kubelet is
	// restarted to measure how soon its SGX resources are back.
	kubeletRestarts = 3
	// readvertiseBound fails the test; the goal (docs/benchmarks/attest.md)
	// is 5s for the EPC, measured and logged.
	readvertiseBound = 30 * time.Second

	resourceEPC     = corev1.ResourceName("sgx.intel.com/epc")
	resourceEnclave = corev1.ResourceName("sgx.intel.com/enclave")
	teeResourcesApp = "xila-guard-tee-resources"
)

// assessTEEResources checks the TEE resource agents of the chart
// (confidential.teeResources) in TestAttestation: the attested worker
// offers the EPC its lab attester states and the enclave devices, the
// worker whose attestation fails offers neither; two tenant pods that each
// ask for 0.6 of the EPC do not both fit, the second staying Pending for
// sgx.intel.com/epc; the first sees the enclave device; after each of a
// few kubelet restarts the resources are offered again, the time it took
// logged, and the restarted kubelet admits the second pod once the first
// is gone; and after a kubelet start without its device-plugin
// checkpoint, which zeroes every extended resource, the EPC is put back.
func assessTEEResources(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
	a := attestedFrom(ctx, t)
	cs := clientset(t, cfg)
	w, tampered := a.workers[attestedWorker], a.workers[tamperedWorker]
	waitAttested(ctx, t, cfg, w, time.Minute, func(s *attestedSpec) bool { return s.TEE.Attestation.Verdict == "Passed" })
	if got := stateEPCSize(ctx, t, cfg, w); got != labEPCSize {
		t.Errorf("the attested state of %s states an EPC size of %d bytes, want %d", w, got, labEPCSize)
	}
	waitAllocatable(ctx, t, cs, w, time.Minute, labEPCSize, enclaveLimit)
	// Refused by the reference values: its EPC is verified but not offered.
	waitAllocatable(ctx, t, cs, tampered, time.Minute, 0, 0)

	first := createEPCPod(ctx, t, cs, a.tenant, "epc-first", epcRequest)
	if got := waitRunning(ctx, t, cs, a.tenant, first.Name).Spec.NodeName; got != w {
		t.Errorf("pod %s runs on %s, want the attested worker %s", first.Name, got, w)
	}
	// The enclave device, the lab's /dev/null in its place.
	if out := kubectlExec(ctx, t, cfg, a.tenant, first.Name, "/usr/local/bin/agnhost", "mounttest", "--file_mode=/dev/sgx_enclave"); !strings.Contains(out, "Dcrw") {
		t.Errorf("pod %s: /dev/sgx_enclave is %q, want a character device", first.Name, out)
	}
	second := createEPCPod(ctx, t, cs, a.tenant, "epc-second", epcRequest)
	waitRefusedWith(ctx, t, cs, second, "Insufficient "+string(resourceEPC))
	waitFailedScheduling(ctx, t, cs, second, string(resourceEPC))

	for i := range kubeletRestarts {
		logReadvertise(t, w, fmt.Sprintf("kubelet restart %d", i+1), restartKubelet(ctx, t, cs, w, false))
	}
	// The restarted kubelet admits an enclave pod: the second pod runs once
	// the first gives its EPC back.
	deletePodNow(ctx, t, cs, first)
	if got := waitRunning(ctx, t, cs, a.tenant, second.Name).Spec.NodeName; got != w {
		t.Errorf("pod %s runs on %s, want %s", second.Name, got, w)
	}
	deletePodNow(ctx, t, cs, second)
	waitPodGone(ctx, t, cs, second)
	// A kubelet that starts without its device-plugin checkpoint, as on a
	// rebooted node, sets every extended resource to 0 while it registers
	// the node: here the EPC is set to 0 while the kubelet is stopped, and
	// the agent puts it back once the kubelet is up.
	m := restartKubelet(ctx, t, cs, w, true)
	logReadvertise(t, w, "kubelet start after the EPC was zeroed", m)
	if !m.epcDropped {
		t.Errorf("the EPC of %s was zeroed and not seen withdrawn", w)
	}
	return ctx
}

func logReadvertise(t *testing.T, node, what string, m readvertise) {
	t.Helper()
	t.Logf("%s of %s: kubelet healthy after %s, enclave plugin registered after %s, EPC patched after %s; "+
		"allocatable %s withdrawn: %v, back after %s; %s withdrawn: %v, back after %s",
		what, node, m.kubeletUp, m.registered, m.patched, resourceEPC, m.epcDropped, m.epc, resourceEnclave, m.enclaveDropped, m.enclave)
	if m.epc > readvertiseBound || m.enclave > readvertiseBound || m.registered > readvertiseBound {
		t.Errorf("%s: the SGX resources of %s came back after %s (EPC) and %s (enclaves), the plugin registered after %s; want within %s",
			what, node, m.epc, m.enclave, m.registered, readvertiseBound)
	}
}

func waitPodGone(ctx context.Context, t *testing.T, cs kubernetes.Interface, p *corev1.Pod) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		return err != nil, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s still there: %v", p.Namespace, p.Name, err)
	}
}

// stateEPCSize returns the EPC size of the node's NodeSecurityState, in
// bytes, 0 when it states none.
func stateEPCSize(ctx context.Context, t *testing.T, cfg *envconf.Config, node string) int64 {
	t.Helper()
	u, err := dynamicClientFor(t, cfg).Resource(lab.States).Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tee, _ := u.Object["spec"].(map[string]any)["tee"].(map[string]any)
	var v string
	switch x := tee["epcSize"].(type) {
	case string:
		v = x
	case int64:
		v = fmt.Sprint(x)
	case float64:
		v = fmt.Sprint(int64(x))
	default:
		return 0
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		t.Fatalf("the EPC size %q of %s: %v", v, node, err)
	}
	return q.Value()
}

// allocatable returns the node's allocatable EPC and enclave devices.
func allocatable(ctx context.Context, cs kubernetes.Interface, node string) (epc, enclaves int64, err error) {
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return 0, 0, err
	}
	e, c := n.Status.Allocatable[resourceEPC], n.Status.Allocatable[resourceEnclave]
	return e.Value(), c.Value(), nil
}

func waitAllocatable(ctx context.Context, t *testing.T, cs kubernetes.Interface, node string, timeout time.Duration, epc, enclaves int64) {
	t.Helper()
	var gotEPC, gotEnclaves int64
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		gotEPC, gotEnclaves, err = allocatable(ctx, cs, node)
		return err == nil && gotEPC == epc && gotEnclaves == enclaves, nil
	})
	if err != nil {
		t.Fatalf("node %s: allocatable %s=%d, %s=%d; want %d and %d: %v", node, resourceEPC, gotEPC, resourceEnclave, gotEnclaves, epc, enclaves, err)
	}
}

// createEPCPod creates a tenant pod for the controlled scheduler that asks
// for epc bytes of EPC and one enclave device (requests and limits: the
// scheduler counts extended resources only with both).
func createEPCPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string, epc int64) *corev1.Pod {
	t.Helper()
	res := corev1.ResourceList{resourceEPC: *resource.NewQuantity(epc, resource.DecimalSI), resourceEnclave: resource.MustParse("1")}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			SchedulerName: lab.ControlledScheduler,
			Containers: []corev1.Container{{
				Name: "pause", Image: suite.Agnhost, ImagePullPolicy: corev1.PullNever, Args: []string{"pause"},
				Resources: corev1.ResourceRequirements{Requests: res, Limits: res},
			}},
		},
	}
	created, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s/%s: %v", ns, name, err)
	}
	return created
}

// waitFailedScheduling waits for a FailedScheduling Event about the pod
// whose message contains part.
func waitFailedScheduling(ctx context.Context, t *testing.T, cs kubernetes.Interface, p *corev1.Pod, part string) {
	t.Helper()
	var seen []string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + p.Name})
		if err != nil {
			return false, nil
		}
		seen = seen[:0]
		for _, e := range list.Items {
			seen = append(seen, e.Reason+": "+e.Message)
			if e.Reason == "FailedScheduling" && strings.Contains(e.Message, part) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no FailedScheduling Event mentioning %s about %s/%s: %v (seen %q)", part, p.Namespace, p.Name, err, seen)
	}
}

// kubectlExec runs a command in the pod's container and returns its
// output.
func kubectlExec(ctx context.Context, t *testing.T, cfg *envconf.Config, ns, pod string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, filepath.Join(suite.BinDir, "kubectl"),
		append([]string{"--kubeconfig", cfg.KubeconfigFile(), "exec", "-n", ns, pod, "--"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl exec %s/%s %s: %v: %s", ns, pod, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// readvertise is how long after a kubelet restart each thing took.
type readvertise struct {
	// kubeletUp: the kubelet answers its healthz again.
	kubeletUp time.Duration
	// registered: the enclave plugin registered with the new kubelet;
	// patched: the agent then patched the EPC again; both by the agent's
	// log.
	registered, patched time.Duration
	// epc and enclave: the node's allocatable shows the resource again,
	// 0 when it was never seen withdrawn; dropped says whether it was.
	epc, enclave               time.Duration
	epcDropped, enclaveDropped bool
}

// kubeletHealthz asks the node's kubelet for its healthz (no curl on the
// node image: bash's /dev/tcp).
const kubeletHealthz = `exec 3<>/dev/tcp/127.0.0.1/10248 && printf 'GET /healthz HTTP/1.0\r\n\r\n' >&3 && grep -q '^ok' <&3`

// restartKubelet restarts the node's kubelet (systemctl restart kubelet;
// with zeroed, stops it, sets the node's EPC to 0 as the kubelet of a
// rebooted node does when it registers the node, and starts it) and
// measures, from the restart or the start, when the kubelet is up, when
// the enclave plugin has registered with it and the agent patched the EPC
// again, and when the node's allocatable shows the SGX resources again; it
// returns once all that happened, and checks that they stay.
func restartKubelet(ctx context.Context, t *testing.T, cs kubernetes.Interface, node string, zeroed bool) readvertise {
	t.Helper()
	agent := teeAgentPod(ctx, t, cs, node)
	regs, err := logTimes(ctx, cs, agent, msgRegistered)
	if err != nil {
		t.Fatal(err)
	}
	patches, err := logTimes(ctx, cs, agent, msgPatched)
	if err != nil {
		t.Fatal(err)
	}
	before, patchesBefore := len(regs), len(patches)
	var m readvertise
	restart := []string{"systemctl", "restart", "kubelet"}
	if zeroed {
		if out, err := dockerExec(ctx, node, nil, "systemctl", "stop", "kubelet"); err != nil {
			t.Fatalf("stopping the kubelet of %s: %v (%s)", node, err, out)
		}
		zero := []byte(`{"status":{"capacity":{"sgx.intel.com/epc":"0"},"allocatable":{"sgx.intel.com/epc":"0"}}}`)
		n, err := cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, zero, metav1.PatchOptions{}, "status")
		if err != nil {
			t.Fatalf("zeroing the EPC of %s: %v", node, err)
		}
		// The agent may put it back before the poll below looks (it
		// watches the node): the write's answer is what shows it was
		// withdrawn.
		if q := n.Status.Allocatable[resourceEPC]; !q.IsZero() {
			t.Fatalf("zeroing the EPC of %s: allocatable %s is %s after the write", node, resourceEPC, q.String())
		}
		m.epcDropped = true
		restart = []string{"systemctl", "start", "kubelet"}
	}
	start := time.Now()
	if out, err := dockerExec(ctx, node, nil, restart...); err != nil {
		t.Fatalf("restarting the kubelet of %s: %v (%s)", node, err, out)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if m.kubeletUp == 0 {
			if _, err := dockerExec(ctx, node, nil, "bash", "-c", kubeletHealthz); err == nil {
				m.kubeletUp = time.Since(start)
			}
		}
		if m.registered == 0 {
			if regs, err := logTimes(ctx, cs, agent, msgRegistered); err == nil && len(regs) > before {
				m.registered = max(regs[before].Sub(start), time.Millisecond)
			}
		}
		if m.patched == 0 {
			if p, err := logTimes(ctx, cs, agent, msgPatched); err == nil && len(p) > patchesBefore {
				m.patched = max(p[patchesBefore].Sub(start), time.Millisecond)
			}
		}
		epc, enclaves, err := allocatable(ctx, cs, node)
		if err != nil {
			return false, nil
		}
		at := time.Since(start)
		epcOK, enclaveOK := epc == labEPCSize, enclaves == enclaveLimit
		if !epcOK {
			m.epcDropped, m.epc = true, 0
		} else if m.epcDropped && m.epc == 0 {
			m.epc = at
		}
		if !enclaveOK {
			m.enclaveDropped, m.enclave = true, 0
		} else if m.enclaveDropped && m.enclave == 0 {
			m.enclave = at
		}
		return m.kubeletUp > 0 && m.registered > 0 && m.patched > 0 && at > m.registered && epcOK && enclaveOK, nil
	})
	if err != nil {
		t.Fatalf("after restarting the kubelet of %s: %v (%+v)", node, err, m)
	}
	// They stay: no late status update of the new kubelet withdraws them.
	for range 10 {
		time.Sleep(500 * time.Millisecond)
		if epc, enclaves, err := allocatable(ctx, cs, node); err == nil && (epc != labEPCSize || enclaves != enclaveLimit) {
			t.Errorf("node %s: allocatable %s=%d, %s=%d %s after its kubelet restarted", node, resourceEPC, epc, resourceEnclave, enclaves, time.Since(start))
		}
	}
	waitNodeReady(ctx, t, cs, node)
	return m
}

// teeAgentPod returns the name of the TEE resource agent on the node.
func teeAgentPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, node string) string {
	t.Helper()
	pods, err := cs.CoreV1().Pods(lab.PlatformNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/name=" + teeResourcesApp, FieldSelector: "spec.nodeName=" + node})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the TEE resource agent of %s: %v (%d pods)", node, err, len(pods.Items))
	}
	return pods.Items[0].Name
}

// Messages of the agent's log.
const (
	msgRegistered = "registered with the kubelet"
	msgPatched    = "patched the node's EPC capacity"
)

// logTimes returns the times of the agent's log lines with message msg
// (its JSON log). The log comes through the node's kubelet, so it cannot
// be read while the kubelet restarts.
func logTimes(ctx context.Context, cs kubernetes.Interface, pod, msg string) ([]time.Time, error) {
	data, err := cs.CoreV1().Pods(lab.PlatformNamespace).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("the log of %s: %w", pod, err)
	}
	var out []time.Time
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var line struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == msg {
			out = append(out, line.Time)
		}
	}
	return out, nil
}

func waitNodeReady(ctx context.Context, t *testing.T, cs kubernetes.Interface, node string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("node %s not Ready after its kubelet restarted: %v", node, err)
	}
}
