package app

import (
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseFlags(t *testing.T) {
	defaults := Options{Namespace: DefaultNamespace, Workers: 4, MetricsAddr: ":9090", ProbeAddr: ":9091",
		LeaderElect: true, LeaderElectionNS: DefaultNamespace, KubeVirtController: "system:serviceaccount:kubevirt:kubevirt-controller"}
	with := func(change func(*Options)) *Options {
		o := defaults
		change(&o)
		return &o
	}
	cases := []struct {
		name    string
		env     string
		args    []string
		want    *Options
		wantErr string
	}{
		{name: "defaults", want: &defaults},
		{name: "namespace from the pod", env: "platform", want: with(func(o *Options) { o.Namespace, o.LeaderElectionNS = "platform", "platform" })},
		{name: "flag beats the pod", env: "platform", args: []string{"--namespace=gpu"},
			want: with(func(o *Options) { o.Namespace, o.LeaderElectionNS = "gpu", "gpu" })},
		{name: "lease elsewhere", args: []string{"--leader-election-namespace=kube-system", "--leader-elect=false"},
			want: with(func(o *Options) { o.LeaderElectionNS, o.LeaderElect = "kube-system", false })},
		{name: "addresses and workers", args: []string{"--kubeconfig=/k", "--metrics-bind-address=0", "--health-probe-bind-address=:8081", "--workers=2"},
			want: with(func(o *Options) { o.Kubeconfig, o.MetricsAddr, o.ProbeAddr, o.Workers = "/k", "0", ":8081", 2 })},
		{name: "KubeVirt's controller", args: []string{"--kubevirt-controller=system:serviceaccount:virt:controller"},
			want: with(func(o *Options) { o.KubeVirtController = "system:serviceaccount:virt:controller" })},
		{name: "bad namespace", args: []string{"--namespace=Not_A_Namespace"}, wantErr: "--namespace"},
		{name: "no workers", args: []string{"--workers=0"}, wantErr: "--workers"},
		{name: "unknown flag", args: []string{"--profile=lab"}, wantErr: "not defined"},
		{name: "stray argument", args: []string{"run"}, wantErr: "unexpected arguments"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("POD_NAMESPACE", tc.env)
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
