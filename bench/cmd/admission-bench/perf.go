package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// perfRecording is perf record attached to a process, with call graphs.
type perfRecording struct{ cmd *exec.Cmd }

// recordPerf starts perf on pid, writing to path; stop ends it.
func recordPerf(pid int, path string) (*perfRecording, error) {
	cmd := exec.Command("perf", "record", "-F", "499", "-g", "-p", strconv.Itoa(pid), "-o", path)
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting perf (is it installed?): %w", err)
	}
	// perf needs a moment to attach.
	time.Sleep(200 * time.Millisecond)
	return &perfRecording{cmd: cmd}, nil
}

func (p *perfRecording) stop() {
	_ = p.cmd.Process.Signal(os.Interrupt)
	_ = p.cmd.Wait()
}
