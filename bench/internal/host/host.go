// Package host reads what a benchmark reports about the machine it ran
// on: the load average, and the CPU time of this and other processes.
package host

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// LoadAvg is the first three fields of /proc/loadavg, or "unknown".
func LoadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// SelfCPU is this process's user plus system CPU time so far.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// clockTick is the unit of utime and stime in /proc/<pid>/stat.
const clockTick = 10 * time.Millisecond

// ProcCPU is the user plus system CPU time so far of process pid, or 0
// when it cannot be read.
func ProcCPU(pid int) time.Duration {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	f := statFields(string(data))
	if len(f) < 13 {
		return 0
	}
	return ticks(f[11]) + ticks(f[12])
}

// Children returns the pids of this process's children by command name
// (as /proc/<pid>/comm shows it, at most 15 characters).
func Children() map[string][]int {
	self := strconv.Itoa(os.Getpid())
	out := map[string][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(data)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		f := statFields(s)
		if open < 0 || end < open || len(f) < 2 || f[1] != self {
			continue
		}
		name := s[open+1 : end]
		out[name] = append(out[name], pid)
	}
	return out
}

// statFields splits /proc/<pid>/stat after the command name, which may
// hold spaces: f[0] is the state, f[1] the parent's pid, and f[11] and
// f[12] utime and stime.
func statFields(stat string) []string {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(stat[i+1:])
}

func ticks(s string) time.Duration {
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.Duration(n) * clockTick
}
