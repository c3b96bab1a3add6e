//go:build linux

package dataplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xila-guard/xila-guard/components/agent/internal/bpfobj"
	"github.com/xila-guard/xila-guard/components/agent/rules"
)

// SetFrontends replaces the set of Service addresses whose traffic from
// pods is judged after DNAT. Pass compiler.Frontends and the cluster's
// service CIDRs, so that a new Service is covered before it is seen.
func (d *Dataplane) SetFrontends(prefixes []netip.Prefix) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	want := map[bpfobj.XgFrontendKey]bool{}
	for _, p := range prefixes {
		want[frontendKey(rules.Canonical(p))] = true
	}
	var have []bpfobj.XgFrontendKey
	var k bpfobj.XgFrontendKey
	var v uint8
	for it := d.objs.XgFrontends.Iterate(); it.Next(&k, &v); {
		have = append(have, k)
	}
	// Add before removing: an address that stays never leaves the set.
	for k := range want {
		if err := d.objs.XgFrontends.Put(k, uint8(1)); err != nil {
			return fmt.Errorf("adding frontend %s: %w", frontendPrefix(k), err)
		}
	}
	for _, k := range have {
		if !want[k] {
			if err := d.objs.XgFrontends.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("removing frontend %s: %w", frontendPrefix(k), err)
			}
		}
	}
	return nil
}

// Endpoints returns the interfaces the dataplane manages.
func (d *Dataplane) Endpoints() ([]int, error) {
	var out []int
	var k uint32
	var v bpfobj.XgEndpoint
	it := d.objs.XgEndpoints.Iterate()
	for it.Next(&k, &v) {
		out = append(out, int(k))
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("listing endpoints: %w", err)
	}
	return out, nil
}

func (d *Dataplane) endpoint(ifindex int) (bpfobj.XgEndpoint, bool) {
	var v bpfobj.XgEndpoint
	err := d.objs.XgEndpoints.Lookup(uint32(ifindex), &v)
	return v, err == nil
}

func (d *Dataplane) addAddrs(ep Endpoint) error {
	for _, a := range ep.Addrs {
		if err := d.objs.XgEpAddrs.Put(addrKey(ep.Ifindex, a), uint8(1)); err != nil {
			return fmt.Errorf("adding address %s of endpoint %d: %w", a, ep.Ifindex, err)
		}
		if d.addrs[ep.Ifindex] == nil {
			d.addrs[ep.Ifindex] = map[netip.Addr]bool{}
		}
		d.addrs[ep.Ifindex][a.Unmap()] = true
	}
	return nil
}

func (d *Dataplane) removeStaleAddrs(ep Endpoint) error {
	keep := map[netip.Addr]bool{}
	for _, a := range ep.Addrs {
		keep[a.Unmap()] = true
	}
	for a := range d.addrs[ep.Ifindex] {
		if keep[a] {
			continue
		}
		if err := d.objs.XgEpAddrs.Delete(addrKey(ep.Ifindex, a)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("removing address %s of endpoint %d: %w", a, ep.Ifindex, err)
		}
		delete(d.addrs[ep.Ifindex], a)
	}
	return nil
}

// purgeFlows deletes the tracked flows of the given interfaces. The flow
// table is read in batches: one lookup per entry costs two system calls,
// which for a full table of 65,536 flows took about 300 ms per removed pod.
func (d *Dataplane) purgeFlows(ifindexes map[uint32]bool) error {
	if len(ifindexes) == 0 {
		return nil
	}
	stale, err := d.flowsOf(ifindexes)
	if err != nil {
		return err
	}
	if len(stale) == 0 {
		return nil
	}
	if _, err := d.objs.XgFlows.BatchDelete(stale, nil); err == nil {
		return nil
	}
	for _, k := range stale {
		if err := d.objs.XgFlows.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("deleting flows of removed endpoints: %w", err)
		}
	}
	return nil
}

// flowBatch is how many flows one batch lookup reads.
const flowBatch = 4096

// flowsOf returns the keys of the tracked flows of the given interfaces.
func (d *Dataplane) flowsOf(ifindexes map[uint32]bool) ([]bpfobj.XgFlowKey, error) {
	var stale []bpfobj.XgFlowKey
	keys := make([]bpfobj.XgFlowKey, flowBatch)
	vals := make([]bpfobj.XgFlowValue, flowBatch)
	var cursor ebpf.MapBatchCursor
	for {
		n, err := d.objs.XgFlows.BatchLookup(&cursor, keys, vals, nil)
		for _, k := range keys[:n] {
			if ifindexes[k.Ifindex] {
				stale = append(stale, k)
			}
		}
		switch {
		case errors.Is(err, ebpf.ErrKeyNotExist):
			return stale, nil // the end of the table
		case err != nil:
			// No batch operations in this kernel, or a bucket larger than
			// the batch: read the table one entry at a time.
			return d.flowsOfOneByOne(ifindexes)
		}
	}
}

func (d *Dataplane) flowsOfOneByOne(ifindexes map[uint32]bool) ([]bpfobj.XgFlowKey, error) {
	var k bpfobj.XgFlowKey
	var v bpfobj.XgFlowValue
	var stale []bpfobj.XgFlowKey
	it := d.objs.XgFlows.Iterate()
	for it.Next(&k, &v) {
		if ifindexes[k.Ifindex] {
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading tracked flows: %w", err)
	}
	return stale, nil
}

// interfaceExists reports whether ifindex names an interface in the
// current network namespace.
func interfaceExists(ifindex int) bool {
	_, err := net.InterfaceByIndex(ifindex)
	return err == nil
}

func checkBPFFS(path string) error {
	if path == "" {
		return fmt.Errorf("no pin path configured")
	}
	dir := path
	for {
		var st unix.Statfs_t
		err := unix.Statfs(dir, &st)
		if err == nil {
			if st.Type != unix.BPF_FS_MAGIC {
				return fmt.Errorf("pin path %s is not on a bpffs mount (mount -t bpf bpf /sys/fs/bpf)", path)
			}
			return nil
		}
		if !errors.Is(err, os.ErrNotExist) || dir == filepath.Dir(dir) {
			return fmt.Errorf("checking pin path %s: %w", path, err)
		}
		dir = filepath.Dir(dir)
	}
}
