package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

type config struct {
	kubeconfig, agnhost, agentNS string
	pods, namespaces, policies   int
	gap, idle                    time.Duration
	metricsPort                  int
	keep                         bool
}

func run(ctx context.Context, args []string, out io.Writer) error {
	var c config
	fs := flag.NewFlagSet("agent-bench", flag.ContinueOnError)
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (required)")
	fs.StringVar(&c.agnhost, "agnhost", "xila-guard/agnhost:v1.35.4", "agnhost image, present on the nodes")
	fs.StringVar(&c.agentNS, "agent-namespace", "xila-guard-system", "namespace of the agent DaemonSet")
	fs.IntVar(&c.pods, "pods", 200, "pods to create")
	fs.IntVar(&c.namespaces, "namespaces", 10, "namespaces the pods and policies spread over")
	fs.IntVar(&c.policies, "policies", 100, "policies to create, one at a time")
	fs.DurationVar(&c.gap, "gap", 200*time.Millisecond, "pause between two policy creates")
	fs.DurationVar(&c.idle, "idle", 20*time.Second, "idle window for the agents' steady-state CPU")
	fs.IntVar(&c.metricsPort, "metrics-port", 9471, "the agents' metrics port on the node addresses")
	fs.BoolVar(&c.keep, "keep", false, "keep the namespaces afterwards")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.kubeconfig == "" {
		return fmt.Errorf("--kubeconfig is required")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return err
	}
	rc.QPS, rc.Burst = 200, 400
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	agents, err := agentPods(ctx, cs, c.agentNS)
	if err != nil {
		return err
	}
	prefix := fmt.Sprintf("xg-bench-%d", time.Now().Unix()%100000)
	var nss []string
	for i := range c.namespaces {
		nss = append(nss, fmt.Sprintf("%s-%d", prefix, i))
	}
	if !c.keep {
		defer func() {
			for _, ns := range nss {
				cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
			}
		}()
	}
	t0 := time.Now()
	if err := createPods(ctx, cs, c, nss); err != nil {
		return err
	}
	fmt.Fprintf(out, "pods: %d Running in %d namespaces after %s\n", c.pods, c.namespaces, time.Since(t0).Round(time.Second))

	before := scrapeAll(agents, c.metricsPort)
	time.Sleep(c.idle)
	idle := scrapeAll(agents, c.metricsPort)

	created := map[string]time.Time{}
	start := time.Now()
	for i := range c.policies {
		p := policy(i, nss)
		if _, err := cs.NetworkingV1().NetworkPolicies(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating policy %d: %w", i, err)
		}
		created[p.Namespace+"/"+p.Name] = time.Now()
		time.Sleep(c.gap)
	}
	time.Sleep(3 * time.Second)
	busy := scrapeAll(agents, c.metricsPort)
	busyWall := time.Since(start)

	enforced, err := enforcedTimes(ctx, cs, c.agentNS, agents, start.Add(-time.Second))
	if err != nil {
		return err
	}
	report(out, c, agents, created, enforced, before, idle, busy, busyWall)
	return nil
}

type agent struct{ pod, node, ip string }

func agentPods(ctx context.Context, cs kubernetes.Interface, ns string) ([]agent, error) {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=xila-guard-agent"})
	if err != nil {
		return nil, err
	}
	var out []agent
	for _, p := range pods.Items {
		out = append(out, agent{pod: p.Name, node: p.Spec.NodeName, ip: p.Status.HostIP})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no agent pods in %s: install the chart with networkPolicy.enabled=true", ns)
	}
	slices.SortFunc(out, func(a, b agent) int { return strings.Compare(a.node, b.node) })
	return out, nil
}

func createPods(ctx context.Context, cs kubernetes.Interface, c config, nss []string) error {
	zero := int64(0)
	for _, ns := range nss {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: ns, Labels: map[string]string{"bench": "agent"}}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	for i := range c.pods {
		ns := nss[i%len(nss)]
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d", i), Labels: map[string]string{"group": strconv.Itoa(i / len(nss) % 4)}},
			Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: &zero,
				Tolerations:                   nil,
				Containers: []corev1.Container{{Name: "pause", Image: c.agnhost, ImagePullPolicy: corev1.PullNever, Args: []string{"pause"},
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}},
			},
		}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating pod %d: %w", i, err)
		}
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		running := 0
		for _, ns := range nss {
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
					running++
				}
			}
		}
		if running == c.pods {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d pods Running after 10 minutes", running, c.pods)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// policy i lives in namespace i%n and selects one of four pod groups; it
// admits one group of every bench namespace on a named port and a range,
// and limits egress to the bench namespaces.
func policy(i int, nss []string) *networkingv1.NetworkPolicy {
	tcp := corev1.ProtocolTCP
	named, p80 := intstr.FromString("http"), intstr.FromInt32(80)
	end := int32(90)
	group := strconv.Itoa(i / len(nss) % 4)
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: nss[i%len(nss)], Name: fmt.Sprintf("np-%d", i)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"group": group}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"bench": "agent"}},
					PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"group": strconv.Itoa((i + 1) % 4)}},
				}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &named}, {Protocol: &tcp, Port: &p80, EndPort: &end}},
			}},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"bench": "agent"}}}},
			}},
		},
	}
}

// enforcedTimes reads each agent's "change enforced" log lines.
func enforcedTimes(ctx context.Context, cs kubernetes.Interface, ns string, agents []agent, since time.Time) (map[string]map[string]time.Time, error) {
	out := map[string]map[string]time.Time{}
	st := metav1.NewTime(since)
	for _, a := range agents {
		r, err := cs.CoreV1().Pods(ns).GetLogs(a.pod, &corev1.PodLogOptions{SinceTime: &st}).Stream(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading the logs of %s: %w", a.pod, err)
		}
		out[a.node] = map[string]time.Time{}
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var l struct {
				Time   time.Time `json:"time"`
				Msg    string    `json:"msg"`
				Kind   string    `json:"kind"`
				Object string    `json:"object"`
			}
			if json.Unmarshal(sc.Bytes(), &l) != nil || l.Msg != "change enforced" || l.Kind != "NetworkPolicy" {
				continue
			}
			if _, seen := out[a.node][l.Object]; !seen {
				out[a.node][l.Object] = l.Time
			}
		}
		r.Close()
	}
	return out, nil
}

// sample is one scrape of an agent's process metrics.
type sample struct {
	at       time.Time
	cpu, rss float64
}

func scrapeAll(agents []agent, port int) map[string]sample {
	out := map[string]sample{}
	for _, a := range agents {
		s := sample{at: time.Now()}
		resp, err := http.Get(fmt.Sprintf("http://%s:%d/metrics", a.ip, port))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 2 {
				continue
			}
			v, _ := strconv.ParseFloat(f[1], 64)
			switch f[0] {
			case "process_cpu_seconds_total":
				s.cpu = v
			case "process_resident_memory_bytes":
				s.rss = v
			}
		}
		resp.Body.Close()
		out[a.node] = s
	}
	return out
}

func report(out io.Writer, c config, agents []agent, created map[string]time.Time, enforced map[string]map[string]time.Time,
	before, idle, busy map[string]sample, busyWall time.Duration) {
	var cluster []time.Duration
	perNode := map[string][]time.Duration{}
	missing := 0
	for obj, t0 := range created {
		var worst time.Duration
		ok := true
		for _, a := range agents {
			t, found := enforced[a.node][obj]
			if !found {
				ok = false
				continue
			}
			d := t.Sub(t0)
			perNode[a.node] = append(perNode[a.node], d)
			worst = max(worst, d)
		}
		if !ok {
			missing++
			continue
		}
		cluster = append(cluster, worst)
	}
	fmt.Fprintf(out, "policies: %d created %s apart; %d not seen enforced by every agent\n", len(created), c.gap, missing)
	fmt.Fprintf(out, "\n| propagation (API create answered → maps switched) | n | p50 | p90 | p99 | max |\n| --- | --- | --- | --- | --- | --- |\n")
	row := func(name string, ds []time.Duration) {
		slices.Sort(ds)
		fmt.Fprintf(out, "| %s | %d | %s | %s | %s | %s |\n", name, len(ds), q(ds, .5), q(ds, .9), q(ds, .99), q(ds, 1))
	}
	row("every node (slowest agent)", cluster)
	for _, a := range agents {
		row(a.node, perNode[a.node])
	}
	fmt.Fprintf(out, "\n| agent | idle CPU | CPU while policies change | RSS idle | RSS after |\n| --- | --- | --- | --- | --- |\n")
	for _, a := range agents {
		b, i, z := before[a.node], idle[a.node], busy[a.node]
		idleCPU := (i.cpu - b.cpu) / i.at.Sub(b.at).Seconds()
		busyCPU := (z.cpu - i.cpu) / z.at.Sub(i.at).Seconds()
		fmt.Fprintf(out, "| %s | %.1f%% | %.1f%% (%s) | %.0f MiB | %.0f MiB |\n", a.node, 100*idleCPU, 100*busyCPU,
			busyWall.Round(time.Second), i.rss/(1<<20), z.rss/(1<<20))
	}
}

func q(ds []time.Duration, p float64) string {
	if len(ds) == 0 {
		return "-"
	}
	i := int(p*float64(len(ds))+0.5) - 1
	i = min(max(i, 0), len(ds)-1)
	return ds[i].Round(time.Millisecond).String()
}
