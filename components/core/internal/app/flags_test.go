package app

import (
	"errors"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseFlagsDefaults(t *testing.T) {
	got, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := &options{
		listen: ":8080", profile: "production", tlsReloadInterval: 10 * time.Second,
		maxRequestBytes: 16 << 20, maxNodes: 10000, readHeaderTimeout: 5 * time.Second,
		readTimeout: 10 * time.Second, writeTimeout: 10 * time.Second, idleTimeout: 120 * time.Second,
		shutdownTimeout: 20 * time.Second, clockSkew: 30 * time.Second, logLevel: slog.LevelInfo,
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(options{})); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestParseFlagsRefuses(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown profile", []string{"--profile", "staging"}, `--profile "staging"`},
		{"certificate without key", []string{"--tls-cert-file", "c.pem"}, "go together"},
		{"key without certificate", []string{"--tls-key-file", "k.pem"}, "go together"},
		{"zero timeout", []string{"--write-timeout", "0s"}, "--write-timeout must be positive"},
		{"zero body limit", []string{"--max-request-bytes", "0"}, "--max-request-bytes must be positive"},
		{"negative nodes", []string{"--max-nodes", "-1"}, "--max-nodes must not be negative"},
		{"negative skew", []string{"--clock-skew", "-1s"}, "--clock-skew must not be negative"},
		{"bad log level", []string{"--log-level", "loud"}, "invalid value"},
		{"unknown flag", []string{"--colour"}, "flag provided but not defined"},
		{"stray argument", []string{"serve"}, `unexpected arguments: ["serve"]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stderr strings.Builder
			_, err := parseFlags(tc.args, &stderr)
			if err == nil || !strings.Contains(err.Error()+stderr.String(), tc.want) {
				t.Errorf("parseFlags(%q) error = %v, stderr %q; want %q", tc.args, err, stderr.String(), tc.want)
			}
		})
	}
}

func TestParseFlagsHelp(t *testing.T) {
	var stderr strings.Builder
	if _, err := parseFlags([]string{"-h"}, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("error = %v, want flag.ErrHelp", err)
	}
	if !strings.Contains(stderr.String(), "-tls-cert-file") {
		t.Errorf("usage does not list the flags: %s", stderr.String())
	}
}
