package main

import (
	"strings"
	"time"

	"k8s.io/component-base/metrics/legacyregistry"
)

// timer is a histogram's running sum and count.
type timer struct{ sum, count float64 }

// timers reads the histograms that show where a cycle's time goes, keyed
// by a short name: the scheduling algorithm (PreFilter to Score), the
// extension points around binding, and the plugin's evaluations.
func timers() map[string]timer {
	out := map[string]timer{}
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return out
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			var key string
			switch f.GetName() {
			case "scheduler_scheduling_algorithm_duration_seconds":
				key = "algorithm"
			case "scheduler_framework_extension_point_duration_seconds":
				switch p := labels["extension_point"]; p {
				case "PreFilter", "PreBind", "Bind":
					key = p
				}
			case "xila_guard_scheduler_evaluation_duration_seconds":
				key = "evaluator@" + labels["point"]
			}
			if key == "" {
				continue
			}
			t := out[key]
			t.sum += m.GetHistogram().GetSampleSum()
			t.count += float64(m.GetHistogram().GetSampleCount())
			out[key] = t
		}
	}
	return out
}

// meansSince returns the mean of each timer over what was observed since
// before, for the timers that observed anything.
func meansSince(before map[string]timer) map[string]time.Duration {
	out := map[string]time.Duration{}
	for k, t := range timers() {
		b := before[k]
		if n := t.count - b.count; n > 0 {
			out[k] = time.Duration((t.sum - b.sum) / n * float64(time.Second))
		}
	}
	return out
}

// breakdownKeys orders the breakdown's columns.
var breakdownKeys = []string{"algorithm", "PreFilter", "evaluator@PreFilter", "PreBind", "Bind", "evaluator@Bind"}

func breakdownHeader() string {
	return "| variant | " + strings.Join(breakdownKeys, " | ") + " |"
}
