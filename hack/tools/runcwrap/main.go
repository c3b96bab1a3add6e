// Command runcwrap runs the real runc after removing from an OCI bundle every
// capability the calling process cannot grant.
//
// Some sandboxes start containers with a capability bounding set that lacks
// capabilities container engines assume they always have (CAP_SYS_RESOURCE
// above all). Docker then asks runc for every capability when a container is
// privileged, and containerd asks runc to lower oom_score_adj, and runc fails
// with "operation not permitted". runcwrap sits in front of runc as Docker's
// default runtime and as containerd's runc binary inside the kind node image:
// for create and run it edits the bundle's config.json, and for exec the
// --process file, so the request only asks for what the kernel can give. On a
// host whose bounding set is full it changes nothing.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// capabilityNames lists Linux capabilities by number (linux/capability.h).
var capabilityNames = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER",
	"CAP_FSETID", "CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP",
	"CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST",
	"CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER",
	"CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE",
	"CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
	"CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD",
	"CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP",
	"CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
	"CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
	"CAP_CHECKPOINT_RESTORE",
}

// realRuncCandidates are where distributions install runc; the first that is
// not this program wins. XG_REAL_RUNC overrides them.
var realRuncCandidates = []string{"/usr/sbin/runc", "/usr/bin/runc", "/usr/local/sbin/runc", "/usr/local/bin/runc"}

func main() {
	if err := run(os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "runcwrap: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	real, err := realRunc(args[0])
	if err != nil {
		return err
	}
	bounding, err := boundingSet()
	if err != nil {
		return err
	}
	if err := sanitize(args[1:], bounding); err != nil {
		return err
	}
	return syscall.Exec(real, append([]string{real}, args[1:]...), os.Environ())
}

// sanitize edits the OCI file that the runc command line refers to, if any.
func sanitize(args []string, bounding uint64) error {
	cmd, rest := command(args)
	switch cmd {
	case "create", "run":
		bundle := flagValue(rest, "bundle", "b")
		if bundle == "" {
			bundle = "."
		}
		return rewrite(filepath.Join(bundle, "config.json"), func(spec map[string]any) {
			if proc, ok := spec["process"].(map[string]any); ok {
				filterCapabilities(proc, bounding)
				if bounding&(1<<24) == 0 { // CAP_SYS_RESOURCE
					delete(proc, "oomScoreAdj")
				}
			}
		})
	case "exec":
		if p := flagValue(rest, "process", "p"); p != "" {
			return rewrite(p, func(proc map[string]any) { filterCapabilities(proc, bounding) })
		}
	}
	return nil
}

// command returns runc's subcommand and the arguments after it, skipping the
// global flags before it (all of which take a value except the booleans).
func command(args []string) (string, []string) {
	boolean := map[string]bool{"--debug": true, "--systemd-cgroup": true, "--rootless": true, "--help": true, "-h": true, "--version": true, "-v": true}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return a, args[i+1:]
		}
		if !boolean[a] && !strings.Contains(a, "=") {
			i++ // skip the flag's value
		}
	}
	return "", nil
}

// flagValue finds --long/-short value or --long=value in args.
func flagValue(args []string, long, short string) string {
	for i, a := range args {
		for _, name := range []string{"--" + long, "-" + long, "-" + short} {
			if a == name && i+1 < len(args) {
				return args[i+1]
			}
			if v, ok := strings.CutPrefix(a, name+"="); ok {
				return v
			}
		}
	}
	return ""
}

func filterCapabilities(proc map[string]any, bounding uint64) {
	caps, ok := proc["capabilities"].(map[string]any)
	if !ok {
		return
	}
	for set, v := range caps {
		list, ok := v.([]any)
		if !ok {
			continue
		}
		kept := make([]any, 0, len(list))
		for _, c := range list {
			name, _ := c.(string)
			if allowed(name, bounding) {
				kept = append(kept, c)
			}
		}
		caps[set] = kept
	}
}

// allowed reports whether the bounding set holds the named capability;
// names this program does not know are kept for runc to judge.
func allowed(name string, bounding uint64) bool {
	for i, n := range capabilityNames {
		if strings.EqualFold(n, name) {
			return bounding&(1<<uint(i)) != 0
		}
	}
	return true
}

func rewrite(path string, edit func(map[string]any)) error {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil // let runc report its own error
		}
		return fmt.Errorf("reading %s: %w", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // keep uid/gid and limits exactly as written
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	edit(doc)
	out, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	if bytes.Equal(out, data) {
		return nil
	}
	return os.WriteFile(path, out, 0o600)
}

func boundingSet() (uint64, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("reading capability bounding set: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, errors.New("no CapBnd line in /proc/self/status")
}

func realRunc(self string) (string, error) {
	if p := os.Getenv("XG_REAL_RUNC"); p != "" {
		return p, nil
	}
	me, _ := os.Executable()
	for _, c := range realRuncCandidates {
		if same(c, me) || same(c, self) {
			continue
		}
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return c, nil
		}
	}
	return "", fmt.Errorf("no runc found in %s: install runc or set XG_REAL_RUNC", strings.Join(realRuncCandidates, ", "))
}

func same(a, b string) bool {
	if b == "" {
		return false
	}
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}
