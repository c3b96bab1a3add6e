package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

type propConfig struct {
	common
	pods, namespaces, rounds, control int
	churn                             float64
	every, timeout, hold, settle      time.Duration
}

const (
	// probePort is where probes connect: inside the range 80-90 the
	// policies admit, and nothing listens there, so an admitted SYN is
	// answered by the pod's kernel with a reset (no server to fall behind
	// and drop SYNs from its accept queue) and a denied one by nothing.
	probePort  = ":81"
	benchLabel = "bench"
	benchValue = "netpol"
	outsideNS  = "xg-np-outside"
)

// The model: namespace i of --namespaces holds pods p-0..p-(P-1). Pod k
// runs on worker k%2, has slot k/2 and group (k/2)%4. Policy np-j of the
// namespace selects slot j (two pods, one per worker), admits group
// (j+1)%4 of every bench namespace on the named port http and 80-90, and
// limits egress to the bench namespaces. So 200 pods make 100 policies,
// and every pod is selected by exactly one. Two pods in a namespace
// without the bench label (one per worker) are the outside.
type model struct {
	cfg     propConfig
	nss     []string
	perNS   int
	workers []string
	pods    map[string]*corev1.Pod // ns/name
	outside [2]*corev1.Pod
}

func (m *model) podName(k int) string      { return "p-" + strconv.Itoa(k) }
func (m *model) key(ns, k int) string      { return m.nss[ns%len(m.nss)] + "/" + m.podName(k) }
func (m *model) pod(ns, k int) *corev1.Pod { return m.pods[m.key(ns, k)] }
func (m *model) slots() int                { return m.perNS / 2 }

func runPropagation(ctx context.Context, args []string) error {
	var c propConfig
	fs := flag.NewFlagSet("propagation", flag.ContinueOnError)
	c.register(fs)
	fs.IntVar(&c.pods, "pods", 200, "bench pods (two per policy)")
	fs.IntVar(&c.namespaces, "namespaces", 10, "namespaces the pods spread over")
	fs.IntVar(&c.rounds, "rounds", 5, "rounds; each is a policy burst, a pod churn and a burst of deletes")
	fs.IntVar(&c.control, "control", 10, "policies that also get a probe from a peer they admit (must stay allowed)")
	fs.Float64Var(&c.churn, "churn", 0.10, "share of the pods deleted and recreated per round")
	fs.DurationVar(&c.every, "every", 20*time.Millisecond, "probe interval per stream")
	fs.DurationVar(&c.timeout, "timeout", 250*time.Millisecond, "probe timeout: no answer within it is a deny")
	fs.DurationVar(&c.hold, "hold", time.Second, "a verdict must hold this long before a phase ends")
	fs.DurationVar(&c.settle, "settle", 20*time.Second, "longest wait for every probe to reach its verdict")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := c.check(); err != nil {
		return err
	}
	if c.pods%(2*c.namespaces) != 0 {
		return fmt.Errorf("--pods must be a multiple of 2 × --namespaces")
	}
	e, closeOut, err := newEnv(c.common)
	if err != nil {
		return err
	}
	defer closeOut()
	m := &model{cfg: c, perNS: c.pods / c.namespaces, workers: e.workers[:2]}
	for i := range c.namespaces {
		m.nss = append(m.nss, fmt.Sprintf("xg-np-%d", i))
	}
	if err := e.installAgent(ctx); err != nil {
		return err
	}
	t0 := time.Now()
	defer func() {
		for _, ns := range append(slices.Clone(m.nss), outsideNS) {
			e.cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		}
	}()
	if err := m.create(ctx, e); err != nil {
		return err
	}
	e.log.Printf("%d pods Running in %d namespaces after %s", c.pods, c.namespaces, time.Since(t0).Round(time.Second))
	probers, err := startProbers(ctx, c.prober, m.workers)
	if err != nil {
		return err
	}
	defer stopProbers(probers)

	var create, del, churn []phaseResult
	for r := range c.rounds {
		pr, err := m.burst(ctx, e, probers, r, true)
		if err != nil {
			return fmt.Errorf("round %d, creating policies: %w", r+1, err)
		}
		create = append(create, pr)
		cr, err := m.churnRound(ctx, e, probers, r)
		if err != nil {
			return fmt.Errorf("round %d, churn: %w", r+1, err)
		}
		churn = append(churn, cr)
		dr, err := m.burst(ctx, e, probers, r, false)
		if err != nil {
			return fmt.Errorf("round %d, deleting policies: %w", r+1, err)
		}
		del = append(del, dr)
		e.log.Printf("round %d done: create p99 %s, churn p99 %s, delete p99 %s", r+1,
			create[r].rows[0].sum.p99, churn[r].rows[0].sum.p99, del[r].rows[0].sum.p99)
	}
	e.printf("\n%d pods and %d policies, %d rounds in %s (set-up included); probes every %s, timeout %s.\n",
		c.pods, c.pods/2, c.rounds, time.Since(t0).Round(time.Second), c.every, c.timeout)
	report(e, "Policy burst: create", create)
	report(e, "Pod churn: delete and recreate", churn)
	report(e, "Policy burst: delete", del)
	return nil
}

// create makes the namespaces and pods and waits for them.
func (m *model) create(ctx context.Context, e *env) error {
	img := m.cfg.agnhost
	for _, ns := range m.nss {
		if err := e.createNamespace(ctx, ns, map[string]string{benchLabel: benchValue}); err != nil {
			return err
		}
	}
	if err := e.createNamespace(ctx, outsideNS, nil); err != nil {
		return err
	}
	var pods []*corev1.Pod
	for _, ns := range m.nss {
		for k := range m.perNS {
			p := m.newPod(k)
			p.Namespace = ns
			pods = append(pods, p)
		}
	}
	for n := range 2 {
		p := agnhostPod(fmt.Sprintf("out-%d", n), m.workers[n], img, map[string]string{"role": "outside"}, "pause")
		p.Namespace = outsideNS
		pods = append(pods, p)
	}
	if err := createAll(ctx, e, pods); err != nil {
		return err
	}
	running, err := e.waitRunning(ctx, append(slices.Clone(m.nss), outsideNS), len(pods), 15*time.Minute)
	if err != nil {
		return err
	}
	m.pods = running
	for n := range 2 {
		m.outside[n] = running[fmt.Sprintf("%s/out-%d", outsideNS, n)]
	}
	return nil
}

func (m *model) newPod(k int) *corev1.Pod {
	slot := k / 2
	labels := map[string]string{benchLabel: benchValue, "slot": strconv.Itoa(slot), "group": strconv.Itoa(slot % 4)}
	return agnhostPod(m.podName(k), m.workers[k%2], m.cfg.agnhost, labels, "pause")
}

func createAll(ctx context.Context, e *env, pods []*corev1.Pod) error {
	sem := make(chan struct{}, 20)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for _, p := range pods {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if _, err := e.cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				mu.Lock()
				first = cmpErr(first, fmt.Errorf("creating pod %s/%s: %w", p.Namespace, p.Name, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// policy j of namespace i.
func (m *model) policy(i, j int) *networkingv1.NetworkPolicy {
	tcp := corev1.ProtocolTCP
	named, p80 := intstr.FromString("http"), intstr.FromInt32(80)
	end := int32(90)
	bench := &metav1.LabelSelector{MatchLabels: map[string]string{benchLabel: benchValue}}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: m.nss[i], Name: "np-" + strconv.Itoa(j)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"slot": strconv.Itoa(j)}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{
					NamespaceSelector: bench,
					PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"group": strconv.Itoa((j + 1) % 4)}},
				}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &named}, {Protocol: &tcp, Port: &p80, EndPort: &end}},
			}},
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: bench}}}},
		},
	}
}

// probe is one stream: from a pod (by address, on its node's prober) to
// an address, and the verdict it should reach.
type probe struct {
	id, kind string
	node     int // index in m.workers of the source pod
	src, dst string
	want     string
	t0       time.Time // the API write it is measured from
	group    string    // policy or pod the probe belongs to
}

func (m *model) start(probers map[string]*nodeProber, ps []*probe) error {
	for _, p := range ps {
		if err := probers[m.workers[p.node]].stream(p.id, p.src, p.dst, m.cfg.every, m.cfg.timeout); err != nil {
			return err
		}
	}
	return nil
}

// burstProbes are one per policy (i, j), alternately: "in", a peer the
// policy does not admit, on the other worker, to a selected pod (the
// selected pod's worker enforces it); "out", a selected pod to the outside
// pod on the other worker (the selected pod's worker enforces its egress).
// Some policies also get "control", an admitted peer to a selected pod,
// which must never be denied. One probe per policy keeps the probes' own
// load low enough not to be what is measured.
func (m *model) burstProbes(round int, creating bool) []*probe {
	want := "deny"
	if !creating {
		want = "allow"
	}
	var ps []*probe
	n := 0
	every := max(1, m.slots()*len(m.nss)/max(1, m.cfg.control))
	for i := range m.nss {
		for j := range m.slots() {
			a := j % 2 // worker of the probed selected pod
			target := m.pod(i, 2*j+a)
			name := fmt.Sprintf("%s/np-%d", m.nss[i], j)
			id := fmt.Sprintf("b%d-%v-%d-%d", round, creating, i, j)
			if (i+j)%2 == 0 {
				ps = append(ps, &probe{id: id + "-in", kind: "in", node: 1 - a, src: m.pod(i+1, 2*j+1-a).Status.PodIP,
					dst: target.Status.PodIP + probePort, want: want, group: name})
			} else {
				ps = append(ps, &probe{id: id + "-out", kind: "out", node: a, src: target.Status.PodIP,
					dst: m.outside[1-a].Status.PodIP + probePort, want: want, group: name})
			}
			if m.cfg.control > 0 && n%every == 0 {
				ps = append(ps, &probe{id: id + "-ctl", kind: "control", node: 1 - a,
					src: m.pod(i+2, 2*((j+1)%4)+1-a).Status.PodIP, dst: target.Status.PodIP + probePort, want: "allow", group: name})
			}
			n++
		}
	}
	return ps
}

// burst creates (or deletes) every policy at once and measures each
// policy's probes from the answer to its own API call.
func (m *model) burst(ctx context.Context, e *env, probers map[string]*nodeProber, round int, creating bool) (phaseResult, error) {
	ps := m.burstProbes(round, creating)
	if err := m.start(probers, ps); err != nil {
		return phaseResult{}, err
	}
	old := "allow"
	if !creating {
		old = "deny"
	}
	// The old verdict first, on every stream that changes.
	if err := waitVerdicts(ctx, probers, m.workers, ps, func(p *probe) string {
		if p.kind == "control" {
			return "allow"
		}
		return old
	}, m.cfg.hold, m.cfg.settle); err != nil {
		return phaseResult{}, fmt.Errorf("before the burst: %w", err)
	}
	cpu0, wall0 := proberCPU(ctx, probers), time.Now()
	load := loadAverage()
	answered := map[string]time.Time{}
	sent := time.Now()
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, len(m.nss)*m.slots())
	for i := range m.nss {
		for j := range m.slots() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pol := m.policy(i, j)
				var err error
				if creating {
					_, err = e.cs.NetworkingV1().NetworkPolicies(pol.Namespace).Create(ctx, pol, metav1.CreateOptions{})
				} else {
					err = e.cs.NetworkingV1().NetworkPolicies(pol.Namespace).Delete(ctx, pol.Name, metav1.DeleteOptions{})
				}
				at := time.Now()
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				answered[pol.Namespace+"/"+pol.Name] = at
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return phaseResult{}, err
	}
	burstStart := wall0
	for _, p := range ps {
		p.t0 = answered[p.group]
	}
	settled := waitVerdicts(ctx, probers, m.workers, ps, func(p *probe) string { return p.want }, m.cfg.hold, m.cfg.settle)
	res := phaseResult{load: load}
	res.proberCPU = (proberCPU(ctx, probers) - cpu0).Seconds() / time.Since(wall0).Seconds()
	results, err := stopAll(ctx, probers, m.workers, ps)
	if err != nil {
		return res, err
	}
	if settled != nil {
		res.notes = append(res.notes, settled.Error())
	}
	res.collect(ps, results, map[string]bool{"in": true, "out": true}, "policy, from its own API answer")
	res.rows = append(res.rows, fromBurstStart(ps, results, sent))
	for _, w := range m.workers {
		res.stalls += probers[w].stallsBetween(burstStart, time.Now())
	}
	if creating {
		if logged, err := agentLogged(ctx, e, burstStart.Add(-time.Second), answered); err == nil {
			res.rows = append(res.rows, newRow("agents logged the change (slowest agent), for comparison", logged, len(answered)-len(logged)))
		} else {
			res.notes = append(res.notes, "agent logs: "+err.Error())
		}
	}
	return res, nil
}

// fromBurstStart is the policy row measured from the moment the burst's
// first request was sent: an upper bound that includes the API server's
// time for the whole burst, since an answer can reach the bench later than
// the object reaches the agents' watches.
func fromBurstStart(ps []*probe, results map[string]settle, sent time.Time) row {
	worst := map[string]time.Duration{}
	missing := map[string]bool{}
	for _, p := range ps {
		if p.kind == "control" {
			continue
		}
		s := results[p.id]
		if !s.reached {
			missing[p.group] = true
			continue
		}
		worst[p.group] = max(worst[p.group], s.at+p.t0.Sub(sent))
	}
	var ds []time.Duration
	for g, d := range worst {
		if !missing[g] {
			ds = append(ds, d)
		}
	}
	return newRow("policy, from the burst's first request", ds, len(missing))
}

// waitVerdicts waits until every stream shows the verdict want gives it,
// unchanged for hold, or until limit has passed.
func waitVerdicts(ctx context.Context, probers map[string]*nodeProber, workers []string, ps []*probe, want func(*probe) string, hold, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		now := time.Now()
		bad := 0
		var example string
		for _, p := range ps {
			h := probers[workers[p.node]].history(p.id)
			if len(h) == 0 || h[len(h)-1].v != want(p) || now.Sub(h[len(h)-1].t) < hold {
				bad++
				if example == "" {
					last := "nothing yet"
					if len(h) > 0 {
						last = h[len(h)-1].v
					}
					example = fmt.Sprintf("%s (%s -> %s) wants %s, shows %s", p.id, p.src, p.dst, want(p), last)
				}
			}
		}
		if bad == 0 {
			return nil
		}
		if now.After(deadline) {
			return fmt.Errorf("%d of %d probes without their verdict after %s, e.g. %s", bad, len(ps), limit, example)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func stopAll(ctx context.Context, probers map[string]*nodeProber, workers []string, ps []*probe) (map[string]settle, error) {
	out := map[string]settle{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var first error
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, _, err := probers[workers[p.node]].stop(ctx, p.id)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				first = cmpErr(first, err)
			}
			out[p.id] = analyze(h, p.want, p.t0)
		}()
	}
	wg.Wait()
	return out, first
}

func proberCPU(ctx context.Context, probers map[string]*nodeProber) time.Duration {
	var sum time.Duration
	for _, p := range probers {
		sum += p.cpu(ctx)
	}
	return sum
}
