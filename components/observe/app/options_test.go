package app

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

func TestParseFlags(t *testing.T) {
	defaults := Options{CoreURL: InProcess, EvalTimeout: guard.DefaultEvalTimeout, Profile: guard.ProfileProduction,
		PublishEvidence: true, TaintPools: true, ComplianceLabels: true, Status: true, RefreshPeriod: time.Minute, Resync: 2 * time.Minute, Workers: 8,
		MetricsAddr: ":9090", ProbeAddr: ":9091", LeaderElect: true}
	lab := defaults
	lab.Profile, lab.MockEvidence, lab.CoreURL, lab.ReportFile = guard.ProfileLab, true, "http://core:8080", "/var/log/guard.jsonl"
	cases := []struct {
		name    string
		args    []string
		want    *Options
		wantErr string
	}{
		{name: "defaults", want: &defaults},
		{name: "lab", args: []string{"--profile=lab", "--mock-evidence", "--core-url=http://core:8080", "--report-file=/var/log/guard.jsonl"}, want: &lab},
		{name: "no compliance labels", args: []string{"--compliance-labels=false"}, want: func() *Options { o := defaults; o.ComplianceLabels = false; return &o }()},
		{name: "mock evidence needs lab", args: []string{"--mock-evidence"}, wantErr: "--mock-evidence needs"},
		{name: "unknown profile", args: []string{"--profile=staging"}, wantErr: "--profile"},
		{name: "no workers", args: []string{"--workers=0"}, wantErr: "--workers"},
		{name: "stray argument", args: []string{"run"}, wantErr: "unexpected arguments"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseFlags(tc.args, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}
