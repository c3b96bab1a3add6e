package controller

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetrics(t *testing.T) {
	g := newRig(t)
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, g.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	g.r.Metrics = m
	g.reconcile() // passed
	g.clock.SetTime(g.clock.Now().Add(time.Minute))
	g.lab.Measurement[0] ^= 1
	g.reconcile() // failed
	g.clock.SetTime(g.clock.Now().Add(time.Minute))
	g.fetcher.err = errors.New("connection refused")
	g.reconcile() // unreachable
	g.clock.SetTime(g.clock.Now().Add(90 * time.Second))

	want := `
# HELP xila_guard_attest_attestations_total Challenges, by result (passed, failed, unreachable, error) and reason code (NONE without one).
# TYPE xila_guard_attest_attestations_total counter
xila_guard_attest_attestations_total{reason="MEASUREMENT_NOT_ALLOWED",result="failed"} 1
xila_guard_attest_attestations_total{reason="NONE",result="passed"} 1
xila_guard_attest_attestations_total{reason="NONE",result="unreachable"} 1
# HELP xila_guard_attest_evidence_age_seconds Age of each node's attested evidence (now less its observedAt), for the nodes the controller attests.
# TYPE xila_guard_attest_evidence_age_seconds gauge
xila_guard_attest_evidence_age_seconds{node="node-1"} 150
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "xila_guard_attest_attestations_total", "xila_guard_attest_evidence_age_seconds"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.verification); n != 1 {
		t.Errorf("%d verification histograms", n)
	}
	if got, _ := reg.Gather(); len(got) != 4 {
		t.Errorf("%d metric families, want 4", len(got))
	}
	// A node that is gone is no longer reported.
	m.forget("node-1")
	if n := testutil.CollectAndCount(m.ages); n != 0 {
		t.Errorf("%d ages after forget", n)
	}
}
