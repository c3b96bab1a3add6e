package main

import (
	"context"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
)

const stopwatchName = "BenchStopwatch"

// stopwatch times each pod's last scheduling attempt, from the start of
// PreFilter (where it runs first) to the end of its bind. Every variant
// runs it, so it costs them all the same.
type stopwatch struct {
	mu      sync.Mutex
	started map[types.UID]time.Time
	took    map[string]time.Duration // by pod name
}

var (
	_ fwk.PreFilterPlugin = &stopwatch{}
	_ fwk.PostBindPlugin  = &stopwatch{}
	_ fwk.SignPlugin      = &stopwatch{}
)

func newStopwatch() *stopwatch {
	return &stopwatch{started: map[types.UID]time.Time{}, took: map[string]time.Duration{}}
}

func (s *stopwatch) factory(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
	return s, nil
}

func (s *stopwatch) Name() string { return stopwatchName }

// SignPod signs nothing, so that the stopwatch does not turn batching off.
func (s *stopwatch) SignPod(context.Context, *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return nil, nil
}

// PreFilter starts the pod's clock.
func (s *stopwatch) PreFilter(_ context.Context, _ fwk.CycleState, p *corev1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	s.mu.Lock()
	s.started[p.UID] = time.Now()
	s.mu.Unlock()
	return nil, nil
}

// PreFilterExtensions returns nil.
func (s *stopwatch) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// PostBind stops it.
func (s *stopwatch) PostBind(_ context.Context, _ fwk.CycleState, p *corev1.Pod, _ string) {
	now := time.Now()
	s.mu.Lock()
	s.took[p.Name] = now.Sub(s.started[p.UID])
	s.mu.Unlock()
}

// latencies returns the times of the pods whose names start with prefix.
func (s *stopwatch) latencies(prefix string) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]time.Duration, 0, len(s.took))
	for name, d := range s.took {
		if strings.HasPrefix(name, prefix) {
			out = append(out, d)
		}
	}
	return out
}
