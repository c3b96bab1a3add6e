package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.now = func() time.Time { return time.Unix(1700000000, 0) }
	m.Evaluated(wire.NodeResult{Decision: guard.DecisionDeny, Reasons: []guard.Reason{"TIME_SLICING_FORBIDDEN", "MIXED_POOL"}}, time.Millisecond, true)
	m.Evaluated(wire.NodeResult{Decision: guard.DecisionAllow}, time.Millisecond, true)
	m.Drifted(guard.DecisionAllow, guard.DecisionDeny)
	m.Published("n")
	m.ComplianceChanged("acme-exclusive", true)
	m.ComplianceChanged("acme-exclusive", false)
	m.ComplianceChanged("acme-exclusive", true)
	want := `
# HELP xila_guard_observe_compliance_label_changes_total Compliance labels added (change=added) or removed (change=removed) on nodes, by policy.
# TYPE xila_guard_observe_compliance_label_changes_total counter
xila_guard_observe_compliance_label_changes_total{change="added",policy="acme-exclusive"} 2
xila_guard_observe_compliance_label_changes_total{change="removed",policy="acme-exclusive"} 1
# HELP xila_guard_observe_decisions_total Post-binding decisions, by decision and reason code (NONE for an allow without notes).
# TYPE xila_guard_observe_decisions_total counter
xila_guard_observe_decisions_total{decision="allow",reason="NONE"} 1
xila_guard_observe_decisions_total{decision="deny",reason="MIXED_POOL"} 1
xila_guard_observe_decisions_total{decision="deny",reason="TIME_SLICING_FORBIDDEN"} 1
# HELP xila_guard_observe_drift_records_total Drift records written, by previous and new decision.
# TYPE xila_guard_observe_drift_records_total counter
xila_guard_observe_drift_records_total{from="allow",to="deny"} 1
# HELP xila_guard_observe_last_successful_sync_timestamp_seconds Unix time of the last success of each loop: evaluate (evaluator answered) or publish (evidence written).
# TYPE xila_guard_observe_last_successful_sync_timestamp_seconds gauge
xila_guard_observe_last_successful_sync_timestamp_seconds{loop="evaluate"} 1.7e+09
xila_guard_observe_last_successful_sync_timestamp_seconds{loop="publish"} 1.7e+09
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "xila_guard_observe_compliance_label_changes_total", "xila_guard_observe_decisions_total",
		"xila_guard_observe_drift_records_total", "xila_guard_observe_last_successful_sync_timestamp_seconds"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.latency); n != 1 {
		t.Errorf("latency collected %d series", n)
	}
}
