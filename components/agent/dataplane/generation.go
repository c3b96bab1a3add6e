//go:build linux

package dataplane

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"

	"github.com/xila-guard/xila-guard/components/agent/internal/bpfobj"
	"github.com/xila-guard/xila-guard/components/agent/rules"
)

// generation is everything written under one policy id, so it can be
// deleted once no endpoint refers to it.
type generation struct {
	id       uint32
	exact    []bpfobj.XgPeerKey
	cidr     []bpfobj.XgPeerCidrKey
	lens     []bpfobj.XgPrefixLensKey
	slot     bool // holds its array slot of prefix lengths
	portsets []bpfobj.XgPortsetKey
}

// ErrTooManyPortRanges is returned for a prefix that allows more port
// ranges than a portset holds.
var ErrTooManyPortRanges = fmt.Errorf("more than %d port ranges for one peer", maxPortRanges)

// allocID returns a policy id never used before on this node. The counter
// is persisted before the id is used, so a crash cannot hand it out twice:
// tracked flows remember ids, and a reused id could vouch for a flow under
// a policy that never allowed it.
func (d *Dataplane) allocID() (uint32, error) {
	id := d.nextID
	if id >= 1<<32 {
		return 0, fmt.Errorf("policy ids exhausted")
	}
	if err := d.objs.XgState.Put(uint32(0), id+1); err != nil {
		return 0, fmt.Errorf("persisting policy id counter: %w", err)
	}
	d.nextID = id + 1
	return uint32(id), nil
}

// writeGeneration stores a rule set under a fresh policy id that nothing
// refers to yet, and returns the id.
func (d *Dataplane) writeGeneration(rs rules.RuleSet) (uint32, error) {
	if !rs.Isolated {
		return policyNone, nil
	}
	if len(rs.Entries) == 0 {
		return policyDenyAll, nil
	}
	id, err := d.allocID()
	if err != nil {
		return 0, err
	}
	g := &generation{id: id}
	if err := d.fill(g, rs); err != nil {
		d.deleteGeneration(g)
		return 0, err
	}
	d.gens[id] = g
	return id, nil
}

func (d *Dataplane) fill(g *generation, rs rules.RuleSet) error {
	portsets := map[string]uint32{}
	var exactVals, cidrVals []bpfobj.XgPeerValue
	for _, e := range rs.Entries {
		idx := uint32(portsetAny)
		if !e.Ports.Any {
			var err error
			if idx, err = d.portset(g, portsets, e.Ports); err != nil {
				return fmt.Errorf("%s: %w", e.Prefix, err)
			}
		}
		val := bpfobj.XgPeerValue{Portset: idx}
		if e.Prefix.IsSingleIP() {
			g.exact = append(g.exact, peerKey(g.id, e.Prefix.Addr()))
			exactVals = append(exactVals, val)
			continue
		}
		g.cidr = append(g.cidr, peerCIDRKey(g.id, e.Prefix))
		cidrVals = append(cidrVals, val)
	}
	if err := putAll(d.objs.XgPeers, g.exact, exactVals); err != nil {
		return err
	}
	if err := putAll(d.objs.XgPeersCidr, g.cidr, cidrVals); err != nil {
		return err
	}
	lk, lv := prefixLens(g.id, g.cidr)
	for i := range lk {
		if err := d.objs.XgPrefixLens.Put(lk[i], &lv[i]); err != nil {
			return fmt.Errorf("adding prefix lengths: %w", err)
		}
		g.lens = append(g.lens, lk[i])
	}
	return d.claimSlot(g, lk, lv)
}

// claimSlot copies the generation's prefix lengths into its array slot, so
// the programs find them without a hash lookup, unless another live
// generation maps to the slot. The array is written in place, so a slot is
// only written while no program can read it: nothing refers to the new id
// yet, and no other live id shares the slot.
func (d *Dataplane) claimSlot(g *generation, lk []bpfobj.XgPrefixLensKey, lv []bpfobj.XgPrefixLens) error {
	if d.slotShared(g.id) {
		return nil
	}
	slot := g.id % prefixSlots
	v := bpfobj.XgPrefixSlot{Policy: g.id}
	for i, k := range lk {
		fi := 0
		if k.Family == familyV6 {
			fi = 1
		}
		v.Count[fi] = uint8(lv[i].Count)
		v.Lens[fi] = lv[i].Lens
	}
	if err := d.objs.XgPrefixSlots.Put(slot, &v); err != nil {
		return fmt.Errorf("writing prefix slot: %w", err)
	}
	g.slot = true
	return nil
}

// portset returns the index of ports within the generation, writing it the
// first time it is used.
func (d *Dataplane) portset(g *generation, seen map[string]uint32, ports rules.PortSet) (uint32, error) {
	key := ports.Key()
	if idx, ok := seen[key]; ok {
		return idx, nil
	}
	if len(ports.Ranges) > maxPortRanges {
		return 0, ErrTooManyPortRanges
	}
	var ps bpfobj.XgPortset
	ps.Count = uint32(len(ports.Ranges))
	for i, r := range ports.Ranges {
		ps.Ranges[i].Proto = uint8(r.Protocol)
		ps.Ranges[i].First = r.First
		ps.Ranges[i].Last = r.Last
	}
	k := bpfobj.XgPortsetKey{Policy: g.id, Index: uint32(len(seen))}
	if err := d.objs.XgPortsets.Put(k, &ps); err != nil {
		return 0, fmt.Errorf("adding port set: %w", err)
	}
	g.portsets = append(g.portsets, k)
	seen[key] = k.Index
	return k.Index, nil
}

// putAll writes in batches where the kernel can, one by one otherwise.
func putAll[K, V any](m *ebpf.Map, keys []K, vals []V) error {
	if len(keys) == 0 {
		return nil
	}
	_, err := m.BatchUpdate(keys, vals, nil)
	if err == nil {
		return nil
	}
	if !errors.Is(err, ebpf.ErrNotSupported) {
		return fmt.Errorf("adding %d peers: %w", len(keys), err)
	}
	for i := range keys {
		if err := m.Put(keys[i], vals[i]); err != nil {
			return fmt.Errorf("adding peer: %w", err)
		}
	}
	return nil
}

// retire deletes the generations of ids no endpoint uses any more, after a
// grace period, so no program still running with the old ids sees their
// entries vanish.
func (d *Dataplane) retire(ids ...uint32) error {
	var old []*generation
	for _, id := range ids {
		if g, ok := d.gens[id]; ok {
			old = append(old, g)
		}
	}
	if len(old) == 0 {
		return nil
	}
	if err := d.barrier.wait(); err != nil {
		return err
	}
	var errs []error
	for _, g := range old {
		errs = append(errs, d.deleteGeneration(g))
	}
	return errors.Join(errs...)
}

// dropGeneration deletes a generation no endpoint ever referred to.
func (d *Dataplane) dropGeneration(id uint32) {
	if g, ok := d.gens[id]; ok {
		d.deleteGeneration(g)
	}
}

func (d *Dataplane) deleteGeneration(g *generation) error {
	var errs []error
	if len(g.exact) > 0 {
		if _, err := d.objs.XgPeers.BatchDelete(g.exact, nil); err != nil {
			for _, k := range g.exact {
				errs = append(errs, ignoreMissing(d.objs.XgPeers.Delete(k)))
			}
		}
	}
	if len(g.cidr) > 0 {
		if _, err := d.objs.XgPeersCidr.BatchDelete(g.cidr, nil); err != nil {
			for _, k := range g.cidr {
				errs = append(errs, ignoreMissing(d.objs.XgPeersCidr.Delete(k)))
			}
		}
	}
	for _, k := range g.lens {
		errs = append(errs, ignoreMissing(d.objs.XgPrefixLens.Delete(k)))
	}
	if g.slot {
		errs = append(errs, d.releaseSlot(g.id))
	}
	for _, k := range g.portsets {
		errs = append(errs, ignoreMissing(d.objs.XgPortsets.Delete(k)))
	}
	delete(d.gens, g.id)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("deleting policy %d: %w", g.id, err)
	}
	return nil
}

func ignoreMissing(err error) error {
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil
	}
	return err
}

// recover rebuilds the bookkeeping from the pinned maps: which generations
// exist, which endpoints and addresses are managed, and the id counter. It
// deletes generations no endpoint refers to (left by a crash between switch
// and cleanup) and endpoints whose interface is gone.
func (d *Dataplane) recover() error {
	var counter uint64
	if err := d.objs.XgState.Lookup(uint32(0), &counter); err != nil {
		return fmt.Errorf("reading policy id counter: %w", err)
	}
	d.nextID = max(counter, firstPolicyID)

	group := func(id uint32) *generation {
		if d.gens[id] == nil {
			d.gens[id] = &generation{id: id}
		}
		return d.gens[id]
	}
	var pk bpfobj.XgPeerKey
	var pv bpfobj.XgPeerValue
	for it := d.objs.XgPeers.Iterate(); it.Next(&pk, &pv); {
		g := group(pk.Policy)
		g.exact = append(g.exact, pk)
	}
	var ck bpfobj.XgPeerCidrKey
	for it := d.objs.XgPeersCidr.Iterate(); it.Next(&ck, &pv); {
		g := group(ck.Policy)
		g.cidr = append(g.cidr, ck)
	}
	var lk bpfobj.XgPrefixLensKey
	var lv bpfobj.XgPrefixLens
	for it := d.objs.XgPrefixLens.Iterate(); it.Next(&lk, &lv); {
		g := group(lk.Policy)
		g.lens = append(g.lens, lk)
	}
	var slot uint32
	var slotVal bpfobj.XgPrefixSlot
	for it := d.objs.XgPrefixSlots.Iterate(); it.Next(&slot, &slotVal); {
		if slotVal.Policy != 0 {
			group(slotVal.Policy).slot = true
		}
	}
	var sk bpfobj.XgPortsetKey
	var sv bpfobj.XgPortset
	for it := d.objs.XgPortsets.Iterate(); it.Next(&sk, &sv); {
		g := group(sk.Policy)
		g.portsets = append(g.portsets, sk)
	}
	for id := range d.gens {
		d.nextID = max(d.nextID, uint64(id)+1)
	}

	live := map[uint32]bool{}
	var gone []int
	var ek uint32
	var ev bpfobj.XgEndpoint
	for it := d.objs.XgEndpoints.Iterate(); it.Next(&ek, &ev); {
		if !interfaceExists(int(ek)) {
			gone = append(gone, int(ek))
			continue
		}
		live[ev.IngressPolicy], live[ev.EgressPolicy] = true, true
	}
	var ak bpfobj.XgEndpointAddrKey
	var av uint8
	for it := d.objs.XgEpAddrs.Iterate(); it.Next(&ak, &av); {
		if d.addrs[int(ak.Ifindex)] == nil {
			d.addrs[int(ak.Ifindex)] = map[netip.Addr]bool{}
		}
		d.addrs[int(ak.Ifindex)][keyAddr(ak)] = true
	}
	var errs []error
	for id, g := range d.gens {
		if !live[id] {
			errs = append(errs, d.deleteGeneration(g))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := d.adoptLinks(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.removeLocked(gone)
}

// slotShared reports whether a live generation other than id maps to id's
// array slot; programs running with it may read the slot at any time.
func (d *Dataplane) slotShared(id uint32) bool {
	for other := range d.gens {
		if other != id && other%prefixSlots == id%prefixSlots {
			return true
		}
	}
	return false
}

// releaseSlot frees the array slot of a policy id that holds it, unless a
// live generation shares the slot (see claimSlot).
func (d *Dataplane) releaseSlot(id uint32) error {
	var cur bpfobj.XgPrefixSlot
	if err := d.objs.XgPrefixSlots.Lookup(id%prefixSlots, &cur); err != nil {
		return fmt.Errorf("reading prefix slot: %w", err)
	}
	if cur.Policy != id || d.slotShared(id) {
		return nil // a stale slot is harmless: ids are never reused
	}
	if err := d.objs.XgPrefixSlots.Put(id%prefixSlots, &bpfobj.XgPrefixSlot{}); err != nil {
		return fmt.Errorf("clearing prefix slot: %w", err)
	}
	return nil
}

// generationCount returns how many policy ids have entries in the maps.
func (d *Dataplane) generationCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.gens)
}
