package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
)

// startProfile starts a CPU profile of the process for one run when
// --cpu-profile-dir is set; the returned function stops it and may be
// called more than once.
func startProfile(o *options, variant string, round int) (func(), error) {
	if o.profileDir == "" {
		return func() {}, nil
	}
	if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(o.profileDir, fmt.Sprintf("%s-%d.pprof", variant, round)))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting the CPU profile: %w", err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			f.Close()
		})
	}, nil
}
