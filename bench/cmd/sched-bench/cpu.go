package main

import (
	"os"
	"time"

	"github.com/xila-guard/xila-guard/bench/internal/host"
)

// cpuTime returns the CPU time used so far by this process — the
// scheduler — and its children: kube-apiserver and etcd.
// On a busy machine it tells the cost of a pod better than the wall clock.
func cpuTime() time.Duration {
	total := host.ProcCPU(os.Getpid())
	for _, pids := range host.Children() {
		for _, pid := range pids {
			total += host.ProcCPU(pid)
		}
	}
	return total
}
