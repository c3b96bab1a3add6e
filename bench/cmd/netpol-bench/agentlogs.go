package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// agentLogged reads every agent's "change enforced" lines since the given
// time (written after the node's maps are switched) and returns, per
// policy in answered, the time from its API answer to the slowest agent's
// line: the measurement agent-bench makes, for comparison with packets.
func agentLogged(ctx context.Context, e *env, since time.Time, answered map[string]time.Time) ([]time.Duration, error) {
	pods, err := e.cs.CoreV1().Pods(agentNS).List(ctx, metav1.ListOptions{LabelSelector: agentSelector})
	if err != nil {
		return nil, err
	}
	if len(pods.Items) == 0 {
		return nil, fmt.Errorf("no agent pods")
	}
	worst := map[string]time.Duration{}
	seen := map[string]int{}
	st := metav1.NewTime(since)
	for _, p := range pods.Items {
		r, err := e.cs.CoreV1().Pods(agentNS).GetLogs(p.Name, &corev1.PodLogOptions{SinceTime: &st}).Stream(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading the logs of %s: %w", p.Name, err)
		}
		first := map[string]bool{}
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var l struct {
				Time   time.Time `json:"time"`
				Msg    string    `json:"msg"`
				Kind   string    `json:"kind"`
				Object string    `json:"object"`
			}
			if json.Unmarshal(sc.Bytes(), &l) != nil || l.Msg != "change enforced" || l.Kind != "NetworkPolicy" || first[l.Object] {
				continue
			}
			t0, ok := answered[l.Object]
			if !ok {
				continue
			}
			first[l.Object] = true
			if d := l.Time.Sub(t0); seen[l.Object] == 0 || d > worst[l.Object] {
				worst[l.Object] = d
			}
			seen[l.Object]++
		}
		r.Close()
	}
	var out []time.Duration
	for obj, d := range worst {
		if seen[obj] == len(pods.Items) {
			out = append(out, d)
		}
	}
	return out, nil
}
