package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
)

// churnRound deletes a share of the pods (spread over both workers and
// every namespace, different ones each round), waits until they are gone,
// creates them again, and measures each new pod's probes from the moment
// its new address appeared in the API (the watch event that carried it).
func (m *model) churnRound(ctx context.Context, e *env, probers map[string]*nodeProber, round int) (phaseResult, error) {
	perNS := max(1, int(float64(m.perNS)*m.cfg.churn+0.5))
	churned := map[string]bool{}
	type victim struct{ ns, k int }
	var vs []victim
	for i := range m.nss {
		for v := range perNS {
			// alternate workers; shift by round so each round picks others
			slot := (i + 3*round + v*(m.slots()/perNS+1)) % m.slots()
			k := 2*slot + v%2
			if churned[m.key(i, k)] {
				continue
			}
			churned[m.key(i, k)] = true
			vs = append(vs, victim{i, k})
		}
	}
	// Sources and destinations for a new pod: pods of the other worker that
	// are not churned this round.
	pick := func(i, k int) *corev1.Pod {
		for d := 1; d <= len(m.nss); d++ {
			if !churned[m.key(i+d, k)] {
				return m.pod(i+d, k)
			}
		}
		return nil
	}
	cpu0, wall0 := proberCPU(ctx, probers), time.Now()
	load := loadAverage()
	// Delete them all at once and wait until they are gone.
	var wg sync.WaitGroup
	for _, v := range vs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.cs.CoreV1().Pods(m.nss[v.ns]).Delete(ctx, m.podName(v.k), metav1.DeleteOptions{})
		}()
	}
	wg.Wait()
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, v := range vs {
			_, err := e.cs.CoreV1().Pods(m.nss[v.ns]).Get(ctx, m.podName(v.k), metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return phaseResult{}, fmt.Errorf("deleted pods still there: %w", err)
	}
	// Watch from now, then create them again.
	list, err := e.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: benchLabel + "=" + benchValue, Limit: 1})
	if err != nil {
		return phaseResult{}, err
	}
	w, err := e.cs.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{LabelSelector: benchLabel + "=" + benchValue, ResourceVersion: list.ResourceVersion})
	if err != nil {
		return phaseResult{}, err
	}
	defer w.Stop()
	created := map[string]time.Time{}
	var cmu sync.Mutex
	for _, v := range vs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := m.newPod(v.k)
			p.Namespace = m.nss[v.ns]
			if _, err := e.cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err == nil {
				cmu.Lock()
				created[p.Namespace+"/"+p.Name] = time.Now()
				cmu.Unlock()
			}
		}()
	}
	var ps []*probe
	var toIP []time.Duration
	seen := map[string]bool{}
	deadline := time.After(5 * time.Minute)
	for len(seen) < len(vs) {
		var ev watch.Event
		select {
		case ev = <-w.ResultChan():
		case <-deadline:
			return phaseResult{}, fmt.Errorf("%d of %d recreated pods got an address in 5 min", len(seen), len(vs))
		case <-ctx.Done():
			return phaseResult{}, ctx.Err()
		}
		at := time.Now()
		pod, ok := ev.Object.(*corev1.Pod)
		if !ok {
			if ev.Type == watch.Error {
				return phaseResult{}, fmt.Errorf("watch: %v", ev.Object)
			}
			continue
		}
		key := pod.Namespace + "/" + pod.Name
		if !churned[key] || seen[key] || pod.Status.PodIP == "" || pod.DeletionTimestamp != nil {
			continue
		}
		seen[key] = true
		m.pods[key] = pod
		i := slices.Index(m.nss, pod.Namespace)
		k, _ := strconv.Atoi(pod.Name[2:])
		n := k % 2
		slot := k / 2
		admitted := (slot + 1) % 4        // group the new pod's policy admits
		admitting := (slot%4 + 3) % 4     // slot whose policy admits the new pod's group
		notAdmitted := (admitted + 1) % 4 // a slot whose group is not admitted
		ip := pod.Status.PodIP
		id := fmt.Sprintf("c%d-%d-%d", round, i, k)
		newPS := []*probe{
			{id: id + "-in-allow", kind: "to the new pod, admitted peer", node: 1 - n, src: pick(i, 2*admitted+1-n).Status.PodIP, dst: ip + probePort, want: "allow"},
			{id: id + "-in-deny", kind: "to the new pod, peer not admitted", node: 1 - n, src: pick(i, 2*notAdmitted+1-n).Status.PodIP, dst: ip + probePort, want: "deny"},
			{id: id + "-out-allow", kind: "from the new pod, to a pod admitting it", node: n, src: ip, dst: pick(i, 2*admitting+1-n).Status.PodIP + probePort, want: "allow"},
			{id: id + "-out-deny", kind: "from the new pod, to the outside", node: n, src: ip, dst: m.outside[1-n].Status.PodIP + probePort, want: "deny"},
		}
		for _, p := range newPS {
			p.t0, p.group = at, key
		}
		if err := m.start(probers, newPS); err != nil {
			return phaseResult{}, err
		}
		ps = append(ps, newPS...)
		cmu.Lock()
		if c, ok := created[key]; ok {
			toIP = append(toIP, at.Sub(c))
		}
		cmu.Unlock()
	}
	wg.Wait()
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
	all := map[string]bool{}
	for _, p := range ps {
		all[p.kind] = true
	}
	res.collect(ps, results, all, "new pod (slowest of its four probes)")
	fromFirst := 0
	for _, p := range ps {
		if s := results[p.id]; s.reached && s.fromFirst {
			fromFirst++
		}
	}
	res.notes = append(res.notes, fmt.Sprintf("%d of %d probes had their verdict from their first probe (time = when probing began, an upper bound)", fromFirst, len(ps)))
	res.notes = append(res.notes, lateDenials(ps, results))
	res.rows = append(res.rows, newRow("pod create answered → address in the API (the kubelet's share, not counted above)", toIP, len(vs)-len(toIP)))
	for _, w := range m.workers {
		res.stalls += probers[w].stallsBetween(wall0, time.Now())
	}
	return res, nil
}

// lateDenials says how the streams that must be denied began when they
// were not denied from their first probe: "allow" means the new pod was
// reached by a peer its policy does not admit, or reached the outside
// (a leak); an error means the connection failed otherwise, e.g. while a
// route was missing.
func lateDenials(ps []*probe, results map[string]settle) string {
	began := map[string]int{}
	denied := 0
	for _, p := range ps {
		s := results[p.id]
		if p.want != "deny" || !s.reached {
			continue
		}
		denied++
		if !s.fromFirst {
			began[s.first]++
		}
	}
	if len(began) == 0 {
		return fmt.Sprintf("all %d streams that must be denied were denied from their first attempt: their times are when probing began", denied)
	}
	var parts []string
	for _, v := range slices.Sorted(maps.Keys(began)) {
		parts = append(parts, fmt.Sprintf("%s ×%d", v, began[v]))
	}
	return "streams that must be denied and began otherwise, by first verdict: " + strings.Join(parts, ", ")
}
