package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// fullSet is a bounding set with every capability; noSysResource lacks
// CAP_SYS_RESOURCE, as in the sandboxes runcwrap exists for.
const (
	fullSet       = uint64(1<<41 - 1)
	noSysResource = fullSet &^ (1 << 24)
)

func TestCommand(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCmd  string
		wantRest []string
	}{
		{"plain", []string{"create", "--bundle", "/b", "id"}, "create", []string{"--bundle", "/b", "id"}},
		{"global flags with values", []string{"--root", "/run/runc", "--log", "/l", "--log-format", "json", "--systemd-cgroup", "create", "-b", "/b", "id"}, "create", []string{"-b", "/b", "id"}},
		{"flag=value form", []string{"--root=/run/runc", "exec", "--process", "/p", "id"}, "exec", []string{"--process", "/p", "id"}},
		{"no command", []string{"--version"}, "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd, rest := command(tc.args)
			if cmd != tc.wantCmd || !reflect.DeepEqual(rest, tc.wantRest) {
				t.Errorf("command(%q) = %q, %q; want %q, %q", tc.args, cmd, rest, tc.wantCmd, tc.wantRest)
			}
		})
	}
}

func TestSanitizeBundle(t *testing.T) {
	tests := []struct {
		name        string
		bounding    uint64
		wantCaps    []any
		wantOOMKept bool
	}{
		{"full host changes nothing", fullSet, []any{"CAP_CHOWN", "CAP_SYS_RESOURCE", "CAP_SYS_ADMIN"}, true},
		{"missing CAP_SYS_RESOURCE is dropped with oomScoreAdj", noSysResource, []any{"CAP_CHOWN", "CAP_SYS_ADMIN"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			spec := `{"ociVersion":"1.0.2","process":{"user":{"uid":4294967294,"gid":0},"oomScoreAdj":-998,` +
				`"capabilities":{"bounding":["CAP_CHOWN","CAP_SYS_RESOURCE","CAP_SYS_ADMIN"],` +
				`"effective":["CAP_CHOWN","CAP_SYS_RESOURCE","CAP_SYS_ADMIN"]}},"root":{"path":"rootfs"}}`
			if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(spec), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := sanitize([]string{"--root", "/r", "create", "--bundle", dir, "c1"}, tc.bounding); err != nil {
				t.Fatalf("sanitize: %v", err)
			}
			got := readSpec(t, filepath.Join(dir, "config.json"))
			proc := got["process"].(map[string]any)
			caps := proc["capabilities"].(map[string]any)
			for _, set := range []string{"bounding", "effective"} {
				if !reflect.DeepEqual(caps[set], tc.wantCaps) {
					t.Errorf("%s = %v, want %v", set, caps[set], tc.wantCaps)
				}
			}
			if _, kept := proc["oomScoreAdj"]; kept != tc.wantOOMKept {
				t.Errorf("oomScoreAdj kept = %v, want %v", kept, tc.wantOOMKept)
			}
			// Large numbers must survive the round trip exactly.
			if uid := proc["user"].(map[string]any)["uid"].(json.Number); uid != "4294967294" {
				t.Errorf("uid = %s, want 4294967294", uid)
			}
		})
	}
}

func TestSanitizeExecProcess(t *testing.T) {
	p := filepath.Join(t.TempDir(), "process.json")
	if err := os.WriteFile(p, []byte(`{"args":["sh"],"capabilities":{"permitted":["CAP_SYS_RESOURCE","CAP_NET_ADMIN"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := sanitize([]string{"exec", "--process", p, "c1"}, noSysResource); err != nil {
		t.Fatalf("sanitize: %v", err)
	}
	got := readSpec(t, p)["capabilities"].(map[string]any)["permitted"]
	if want := []any{"CAP_NET_ADMIN"}; !reflect.DeepEqual(got, want) {
		t.Errorf("permitted = %v, want %v", got, want)
	}
}

func TestSanitizeMissingBundleIsLeftToRunc(t *testing.T) {
	if err := sanitize([]string{"create", "--bundle", filepath.Join(t.TempDir(), "nope"), "c1"}, noSysResource); err != nil {
		t.Errorf("sanitize of a missing bundle = %v, want nil so runc reports it", err)
	}
}

func TestSanitizeRejectsCorruptSpec(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"process":`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := sanitize([]string{"run", "-b", dir, "c1"}, noSysResource); err == nil {
		t.Error("sanitize of a truncated config.json succeeded, want an error")
	}
}

func readSpec(t *testing.T, path string) map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
	return m
}
