package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat.
const clockTick = 10 * time.Millisecond

// cpuTime returns the CPU time used so far by this process — the
// scheduler — and its children: kube-apiserver and etcd.
// On a busy machine it tells the cost of a pod better than the wall clock.
func cpuTime() time.Duration {
	self := os.Getpid()
	total := procCPU(strconv.Itoa(self))
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		fields := statFields(string(data))
		if len(fields) > 13 && fields[1] == strconv.Itoa(self) {
			total += ticks(fields[11]) + ticks(fields[12])
		}
	}
	return total
}

func procCPU(pid string) time.Duration {
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	fields := statFields(string(data))
	if len(fields) < 13 {
		return 0
	}
	return ticks(fields[11]) + ticks(fields[12])
}

// statFields splits /proc/<pid>/stat after the command name, which may
// hold spaces: fields[0] is the state, fields[1] the parent's pid, and
// fields[11] and [12] utime and stime.
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
