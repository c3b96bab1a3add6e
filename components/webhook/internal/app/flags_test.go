package app

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestParseFlags(t *testing.T) {
	tls := []string{"--tls-cert-file=c", "--tls-key-file=k"}
	o, err := parseFlags(append(tls,
		"--trusted-serviceaccounts=gpu-operator:device-plugin,system:serviceaccount:kube-system:agent",
		"--trusted-serviceaccounts=monitoring:node-exporter",
		"--external-schedulers=volcano", "--external-schedulers=runai-scheduler,kai-scheduler",
		"--scheduler-profile=volcano=volcano.sh/job-name", "--scheduler-profile=runai-scheduler=runai/queue",
		"--scheduler-profile=kai-scheduler=kai.scheduler/queue", "--scheduler-profile=runai-scheduler=app in (a,b)",
	), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"gpu-operator:device-plugin", "system:serviceaccount:kube-system:agent", "monitoring:node-exporter"}; !slices.Equal(o.trusted.values, want) {
		t.Errorf("trusted %v, want %v", o.trusted.values, want)
	}
	if want := []string{"volcano", "runai-scheduler", "kai-scheduler"}; !slices.Equal(o.externalSchedulers.values, want) {
		t.Errorf("external %v, want %v", o.externalSchedulers.values, want)
	}
	if want := []string{"runai/queue", "app in (a,b)"}; !slices.Equal(o.schedulerProfiles.values["runai-scheduler"], want) {
		t.Errorf("profiles of runai-scheduler %v, want %v", o.schedulerProfiles.values["runai-scheduler"], want)
	}
	if !slices.Equal(o.binders.values, []string{DefaultBinder}) {
		t.Errorf("binders %v, want the default", o.binders.values)
	}
	o, err = parseFlags(append(tls, "--binder-serviceaccounts=a:b", "--binder-serviceaccounts=c:d"), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a:b", "c:d"}; !slices.Equal(o.binders.values, want) {
		t.Errorf("binders %v, want %v (the default replaced)", o.binders.values, want)
	}
}

func TestParseFlagsErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{nil, "--tls-cert-file and --tls-key-file are required"},
		{[]string{"--tls-cert-file=c", "--tls-key-file=k", "--trusted-serviceaccounts=nocolon"}, "--trusted-serviceaccounts"},
		{[]string{"--tls-cert-file=c", "--tls-key-file=k", "--binder-serviceaccounts=:x"}, "--binder-serviceaccounts"},
		{[]string{"--tls-cert-file=c", "--tls-key-file=k", "--external-schedulers=xila-guard-scheduler"}, "always accepted"},
		{[]string{"--tls-cert-file=c", "--tls-key-file=k", "--external-schedulers=volcano"}, "volcano has no --scheduler-profile"},
		{[]string{"--tls-cert-file=c", "--tls-key-file=k", "--scheduler-profile=volcano"}, "want <scheduler name>=<label selector>"},
		{[]string{"--tls-cert-file=c", "--tls-key-file=k", "--scheduler-profile=volcano=a in (("}, "--scheduler-profile volcano="},
		{[]string{"--tls-cert-file=c", "--tls-key-file=k", "--scheduler-profile=xila-guard-scheduler=a"}, "profiles are for external schedulers"},
		{[]string{"--tls-cert-file=c", "--tls-key-file=k", "--core-url=http://127.0.0.1:8080"}, "flag provided but not defined: -core-url"},
		{[]string{"--tls-cert-file=c", "--tls-key-file=k", "--pool-label="}, "--pool-label"},
		{[]string{"--tls-cert-file=c", "--tls-key-file=k", "extra"}, "unexpected arguments"},
	}
	for _, tc := range cases {
		_, err := parseFlags(tc.args, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseFlags(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

func TestVersion(t *testing.T) {
	var out bytes.Buffer
	if err := Run(t.Context(), []string{"--version"}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), Name+" ") {
		t.Errorf("--version printed %q", out.String())
	}
}
