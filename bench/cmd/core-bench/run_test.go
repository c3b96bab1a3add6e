package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

func TestRunSmoke(t *testing.T) {
	var out strings.Builder
	err := run(context.Background(), []string{"--nodes", "1,10", "--requests", "20", "--warmup", "2", "--concurrency", "2"}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "server p99") || strings.Contains(lines[1], " - ") {
		t.Errorf("unexpected report:\n%s", out.String())
	}
}

func TestParseRefuses(t *testing.T) {
	for _, args := range [][]string{{"--nodes", "x"}, {"--requests", "0"}, {"--concurrency", "0"}, {"--nodes", "-1"}} {
		if _, err := parse(args, io.Discard); err == nil {
			t.Errorf("parse(%q) succeeded", args)
		}
	}
}
