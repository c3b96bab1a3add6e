//go:build linux

package netns

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// NS is a named network namespace, as made by `ip netns add`.
type NS struct {
	Name string
}

// Prefix returns a short random prefix for namespace and interface names,
// so concurrent test runs do not collide.
func Prefix() string {
	b := make([]byte, 3)
	rand.Read(b)
	return "xg" + hex.EncodeToString(b)
}

// Add creates a namespace, deleted when the test ends.
func Add(t testing.TB, name string) *NS {
	t.Helper()
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	ns := &NS{Name: name}
	ns.MustRun(t, "ip", "link", "set", "lo", "up")
	return ns
}

// Run runs a command inside the namespace.
func (n *NS) Run(args ...string) (string, error) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", n.Name}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s in %s: %w: %s", strings.Join(args, " "), n.Name, err, out)
	}
	return string(out), nil
}

// MustRun runs a command inside the namespace and fails the test on error.
func (n *NS) MustRun(t testing.TB, args ...string) string {
	t.Helper()
	out, err := n.Run(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Do runs fn on a thread that is inside the namespace. Sockets and links
// that fn creates belong to the namespace and stay usable from any
// goroutine afterwards; goroutines fn starts do not run inside it.
func (n *NS) Do(fn func() error) error {
	target, err := os.Open("/run/netns/" + n.Name)
	if err != nil {
		return fmt.Errorf("opening namespace %s: %w", n.Name, err)
	}
	defer target.Close()
	return DoFD(int(target.Fd()), fn)
}

// DoFD is Do for a namespace given by file descriptor.
func DoFD(fd int, fn func() error) error {
	runtime.LockOSThread()
	orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("opening current namespace: %w", err)
	}
	defer orig.Close()
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering namespace: %w", err)
	}
	fnErr := fn()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// Leave the thread locked: it dies with the goroutine instead of
		// running other code in the wrong namespace.
		return fmt.Errorf("returning from namespace: %w", err)
	}
	runtime.UnlockOSThread()
	return fnErr
}
