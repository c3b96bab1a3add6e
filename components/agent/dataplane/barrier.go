//go:build linux

package dataplane

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// rcuBarrier waits until every BPF program that was running has finished.
// The kernel does exactly that (synchronize_rcu) before it returns from an
// update of a map-in-map, so that user space knows no program still uses
// the old inner map; updating a private one-slot map-of-maps borrows that
// guarantee without any timing guess.
type rcuBarrier struct {
	outer, inner *ebpf.Map
	waits        int // grace periods waited for, for tests
}

func newRCUBarrier() (*rcuBarrier, error) {
	innerSpec := &ebpf.MapSpec{Name: "xg_barrier_in", Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1}
	inner, err := ebpf.NewMap(innerSpec)
	if err != nil {
		return nil, fmt.Errorf("creating barrier map: %w", err)
	}
	outer, err := ebpf.NewMap(&ebpf.MapSpec{
		Name: "xg_barrier", Type: ebpf.ArrayOfMaps, KeySize: 4, MaxEntries: 1, InnerMap: innerSpec,
	})
	if err != nil {
		inner.Close()
		return nil, fmt.Errorf("creating barrier map: %w", err)
	}
	return &rcuBarrier{outer: outer, inner: inner}, nil
}

func (b *rcuBarrier) wait() error {
	if err := b.outer.Put(uint32(0), b.inner); err != nil {
		return fmt.Errorf("waiting for an RCU grace period: %w", err)
	}
	b.waits++
	return nil
}

func (b *rcuBarrier) close() error {
	return errors.Join(b.outer.Close(), b.inner.Close())
}
