package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

type dpConfig struct {
	common
	rounds   int
	duration time.Duration
	port     int
}

const rrNS = "xg-np-rr"

// runDataplane measures request/response (TCP_RR) and connect/close
// (TCP_CRR) rates from a client pod on one worker to a server pod on the
// other, in rounds that alternate between the agent enforcing a policy
// that admits exactly this traffic and no agent installed.
func runDataplane(ctx context.Context, args []string) error {
	var c dpConfig
	fs := flag.NewFlagSet("dataplane", flag.ContinueOnError)
	c.register(fs)
	fs.IntVar(&c.rounds, "rounds", 5, "rounds of each configuration (agent, no agent), alternated")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "length of each RR and each CRR run")
	fs.IntVar(&c.port, "port", 5001, "the server's port")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := c.check(); err != nil {
		return err
	}
	e, closeOut, err := newEnv(c.common)
	if err != nil {
		return err
	}
	defer closeOut()
	start := time.Now()
	pods, err := rrSetUp(ctx, e, c)
	if err != nil {
		return err
	}
	probers, err := startProbers(ctx, c.prober, e.workers[:2])
	if err != nil {
		return err
	}
	defer stopProbers(probers)
	client, server, intruder := pods["client"], pods["server"], pods["intruder"]
	cp, sp := probers[client.Spec.NodeName], probers[server.Spec.NodeName]
	if _, err := sp.call(ctx, map[string]any{"op": "serve", "id": "echo", "src": server.Status.PodIP, "port": c.port}, 30*time.Second); err != nil {
		return err
	}
	dst := fmt.Sprintf("%s:%d", server.Status.PodIP, c.port)

	type result struct {
		agent         bool
		load          string
		rr, crr       float64
		rrErr, crrErr int64
		note          string
	}
	var results []result
	for r := range 2 * c.rounds {
		agent := r%2 == 0
		if agent {
			err = e.installAgent(ctx)
		} else {
			err = e.uninstallAgent(ctx)
		}
		if err != nil {
			return fmt.Errorf("round %d: %w", r+1, err)
		}
		// Prove the configuration by packets: the intruder (client's
		// worker, not admitted) is denied only while the agent enforces.
		want := "allow"
		if agent {
			want = "deny"
		}
		checks := []*probe{
			{id: fmt.Sprintf("v%d-client", r), node: 0, src: client.Status.PodIP, dst: dst, want: "allow"},
			{id: fmt.Sprintf("v%d-intruder", r), node: 0, src: intruder.Status.PodIP, dst: dst, want: want},
		}
		workers := []string{client.Spec.NodeName}
		for _, p := range checks {
			if err := cp.stream(p.id, p.src, p.dst, 20*time.Millisecond, 250*time.Millisecond); err != nil {
				return err
			}
		}
		if err := waitVerdicts(ctx, probers, workers, checks, func(p *probe) string { return p.want }, time.Second, 2*time.Minute); err != nil {
			return fmt.Errorf("round %d (agent %v): %w", r+1, agent, err)
		}
		if _, err := stopAll(ctx, probers, workers, checks); err != nil {
			return err
		}
		time.Sleep(2 * time.Second) // let the install's own work finish
		res := result{agent: agent, load: loadAverage()}
		for _, mode := range []string{"rr", "crr"} {
			ev, err := cp.call(ctx, map[string]any{"op": "rr", "id": fmt.Sprintf("%s-%d", mode, r), "src": client.Status.PodIP,
				"dst": dst, "mode": mode, "duration": c.duration.String()}, c.duration+time.Minute)
			if err != nil {
				return fmt.Errorf("round %d %s: %w", r+1, mode, err)
			}
			rate := float64(ev.N) / time.Duration(ev.NS).Seconds()
			if mode == "rr" {
				res.rr, res.rrErr = rate, ev.Errors
			} else {
				res.crr, res.crrErr = rate, ev.Errors
			}
			if ev.Msg != "" {
				res.note += mode + ": " + ev.Msg + " "
			}
		}
		e.log.Printf("round %d agent=%v: RR %.0f/s, CRR %.0f/s (load %s)", r+1, agent, res.rr, res.crr, res.load)
		results = append(results, res)
	}
	e.printf("\n%s → %s across workers, %s per run, %d rounds per configuration alternated; %s in all.\n\n",
		client.Spec.NodeName, server.Spec.NodeName, c.duration, c.rounds, time.Since(start).Round(time.Second))
	e.printf("| round | agent | load | TCP_RR /s | TCP_CRR /s | errors (RR, CRR) | note |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	var rrOn, rrOff, crrOn, crrOff []float64
	for i, r := range results {
		cfg := "none"
		if r.agent {
			cfg = "enforcing"
			rrOn, crrOn = append(rrOn, r.rr), append(crrOn, r.crr)
		} else {
			rrOff, crrOff = append(rrOff, r.rr), append(crrOff, r.crr)
		}
		e.printf("| %d | %s | %s | %.0f | %.0f | %d, %d | %s |\n", i+1, cfg, r.load, r.rr, r.crr, r.rrErr, r.crrErr, r.note)
	}
	e.printf("\n| | no agent (median) | agent enforcing (median) | ratio | goal |\n| --- | --- | --- | --- | --- |\n")
	e.printf("| TCP_RR transactions/s | %.0f | %.0f | %.3f | ≥ 0.97 |\n", medianF(rrOff), medianF(rrOn), medianF(rrOn)/medianF(rrOff))
	e.printf("| TCP_CRR transactions/s | %.0f | %.0f | %.3f | ≥ 0.95 |\n", medianF(crrOff), medianF(crrOn), medianF(crrOn)/medianF(crrOff))
	return nil
}

// rrSetUp creates the client and the intruder on the first worker, the
// server on the second, and the two policies that admit exactly
// client → server:port (the server's ingress, the client's egress).
func rrSetUp(ctx context.Context, e *env, c dpConfig) (map[string]*corev1.Pod, error) {
	if err := e.createNamespace(ctx, rrNS, nil); err != nil {
		return nil, err
	}
	for role, node := range map[string]string{"client": e.workers[0], "intruder": e.workers[0], "server": e.workers[1]} {
		p := agnhostPod(role, node, c.agnhost, map[string]string{"role": role}, "pause")
		if _, err := e.cs.CoreV1().Pods(rrNS).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt(c.port)
	ports := []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}}
	sel := func(role string) metav1.LabelSelector {
		return metav1.LabelSelector{MatchLabels: map[string]string{"role": role}}
	}
	client, server := sel("client"), sel("server")
	for _, p := range []*networkingv1.NetworkPolicy{
		{ObjectMeta: metav1.ObjectMeta{Name: "server-in"}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: server, PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &client}}, Ports: ports}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "client-out"}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: client, PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{PodSelector: &server}}, Ports: ports}}}},
	} {
		if _, err := e.cs.NetworkingV1().NetworkPolicies(rrNS).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	running, err := e.waitRunning(ctx, []string{rrNS}, 3, 5*time.Minute)
	if err != nil {
		return nil, err
	}
	out := map[string]*corev1.Pod{}
	for _, p := range running {
		out[p.Labels["role"]] = p
	}
	return out, nil
}

func medianF(xs []float64) float64 {
	ds := make([]time.Duration, len(xs))
	for i, x := range xs {
		ds[i] = time.Duration(x * 1000)
	}
	return float64(median(ds)) / 1000
}
