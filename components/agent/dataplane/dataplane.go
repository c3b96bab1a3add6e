//go:build linux

package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/cilium/ebpf"

	"github.com/xila-guard/xila-guard/components/agent/internal/bpfobj"
	"github.com/xila-guard/xila-guard/components/agent/rules"
)

// Dataplane is the node's loaded dataplane. Its methods are safe for
// concurrent use.
type Dataplane struct {
	cfg     Config
	mu      sync.Mutex
	objs    bpfobj.XgObjects
	barrier *rcuBarrier
	nextID  uint64
	gens    map[uint32]*generation
	addrs   map[int]map[netip.Addr]bool
	links   map[int]*attachment
	nf      []closer
	mode    AttachMode
}

type closer interface{ Close() error }

// Open loads the programs, reuses or creates the pinned maps under
// cfg.PinPath, recovers the state a previous agent left, and attaches the
// post-DNAT netfilter program. Packets keep being enforced by the pinned
// state while Open runs. Call Open, Apply, Remove and Uninstall from the
// network namespace of the pods' host-side interfaces (the node's).
func Open(cfg Config) (*Dataplane, error) {
	if err := checkBPFFS(cfg.PinPath); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(cfg.PinPath, "links"), 0o700); err != nil {
		return nil, fmt.Errorf("creating pin directory: %w", err)
	}
	d := &Dataplane{
		cfg:   cfg,
		gens:  map[uint32]*generation{},
		addrs: map[int]map[netip.Addr]bool{},
		links: map[int]*attachment{},
	}
	opts := &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: cfg.PinPath}}
	if err := bpfobj.LoadXgObjects(&d.objs, opts); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("loading eBPF objects: %+v", ve)
		}
		return nil, fmt.Errorf("loading eBPF objects: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			d.Close()
		}
	}()
	var err error
	if d.mode, err = resolveMode(cfg.Attach); err != nil {
		return nil, err
	}
	if d.barrier, err = newRCUBarrier(); err != nil {
		return nil, err
	}
	if err := d.recover(); err != nil {
		return nil, fmt.Errorf("recovering pinned state: %w", err)
	}
	if err := d.attachNetfilter(); err != nil {
		return nil, err
	}
	ok = true
	return d, nil
}

// Close releases the agent's handles. Pinned maps, programs and links stay,
// so the last applied policy keeps being enforced.
func (d *Dataplane) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for _, a := range d.links {
		errs = append(errs, a.close())
	}
	for _, l := range d.nf {
		errs = append(errs, l.Close())
	}
	if d.barrier != nil {
		errs = append(errs, d.barrier.close())
	}
	errs = append(errs, d.objs.Close())
	d.links, d.nf = map[int]*attachment{}, nil
	return errors.Join(errs...)
}

// Uninstall detaches everything and removes the pinned state: enforcement
// stops. The Dataplane is closed afterwards.
func (d *Dataplane) Uninstall() error {
	d.mu.Lock()
	var errs []error
	managed, err := d.Endpoints()
	errs = append(errs, err)
	for ifindex := range d.links {
		managed = append(managed, ifindex)
	}
	for _, ifindex := range managed {
		errs = append(errs, d.detach(ifindex))
	}
	d.mu.Unlock()
	errs = append(errs, d.Close())
	errs = append(errs, os.RemoveAll(d.cfg.PinPath))
	return errors.Join(errs...)
}

// Change is one pod's rule sets for ApplyAll.
type Change struct {
	Endpoint        Endpoint
	Ingress, Egress rules.RuleSet
}

// Apply installs a pod's compiled rule sets and attaches the programs to its
// interface. The switch from the previous rules is atomic per pod. If the
// rules cannot be installed (a full map, a port set over the limit), the pod
// is switched to deny-all and the error wraps ErrDenyAll.
func (d *Dataplane) Apply(ep Endpoint, ingress, egress rules.RuleSet) error {
	return d.ApplyAll([]Change{{Endpoint: ep, Ingress: ingress, Egress: egress}})[0]
}

// ApplyAll applies each change as Apply does, in order, and returns one
// error per change. Every pod is switched before the old rules of any are
// deleted, so the whole batch waits for one RCU grace period instead of one
// per pod: with tens of pods whose rules change together (a new peer that
// all of them may reach), per-pod grace periods of 10-15 ms each delayed the
// last pod of the batch by hundreds of milliseconds.
func (d *Dataplane) ApplyAll(changes []Change) []error {
	errs := make([]error, len(changes))
	d.mu.Lock()
	defer d.mu.Unlock()
	var retired []switched
	for i, c := range changes {
		var sw switched
		sw, errs[i] = d.applyLocked(c, &retired)
		if sw.ep.Ifindex != 0 {
			retired = append(retired, sw)
		}
	}
	if err := d.settle(retired); err != nil {
		for i := range errs {
			errs[i] = errors.Join(errs[i], err)
		}
	}
	return errs
}

// switched is an endpoint that now uses new policy ids: after a grace
// period, the ids it used before are deleted, and the addresses it no
// longer has.
type switched struct {
	ep     Endpoint
	in, eg uint32
}

// settle waits for one grace period and then retires what the switches
// replaced.
func (d *Dataplane) settle(sws []switched) error {
	if len(sws) == 0 {
		return nil
	}
	var ids []uint32
	for _, sw := range sws {
		ids = append(ids, sw.in, sw.eg)
	}
	errs := []error{d.retire(ids...)}
	for _, sw := range sws {
		errs = append(errs, d.removeStaleAddrs(sw.ep))
	}
	return errors.Join(errs...)
}

// applyLocked writes and switches one change. When the maps are too full
// for the new rules and earlier switches of the batch still hold their old
// rules, those are retired first and the write is tried once more, so a
// batch never needs more room than pod-by-pod switching would.
func (d *Dataplane) applyLocked(c Change, retired *[]switched) (switched, error) {
	ep := c.Endpoint
	if ep.Ifindex <= 0 {
		return switched{}, fmt.Errorf("endpoint has no interface index")
	}
	if len(ep.Addrs) == 0 && !ep.AnySource {
		return switched{}, fmt.Errorf("endpoint %d has no addresses: every packet from it would count as spoofed", ep.Ifindex)
	}
	old, _ := d.endpoint(ep.Ifindex)
	in, eg, err := d.writeBoth(c)
	if err != nil && len(*retired) > 0 {
		if serr := d.settle(*retired); serr != nil {
			return switched{}, serr
		}
		*retired = nil
		in, eg, err = d.writeBoth(c)
	}
	if err != nil {
		in, eg = policyDenyAll, policyDenyAll
		err = fmt.Errorf("%w: %w", ErrDenyAll, err)
	}
	if ierr := d.install(ep, in, eg); ierr != nil {
		return switched{}, errors.Join(err, ierr)
	}
	sw := switched{ep: ep, in: old.IngressPolicy, eg: old.EgressPolicy}
	return sw, errors.Join(err, d.attach(ep.Ifindex))
}

// writeBoth writes the ingress and egress generations of a change.
func (d *Dataplane) writeBoth(c Change) (in, eg uint32, err error) {
	if in, err = d.writeGeneration(c.Ingress); err != nil {
		return 0, 0, fmt.Errorf("ingress rules: %w", err)
	}
	if eg, err = d.writeGeneration(c.Egress); err != nil {
		d.dropGeneration(in)
		return 0, 0, fmt.Errorf("egress rules: %w", err)
	}
	return in, eg, nil
}

// install switches the endpoint to the given policy ids. The ids it used
// before are the caller's to retire.
func (d *Dataplane) install(ep Endpoint, in, eg uint32) error {
	if err := d.addAddrs(ep); err != nil {
		d.dropGeneration(in)
		d.dropGeneration(eg)
		return err
	}
	val := endpointValue(ep, in, eg)
	if err := d.objs.XgEndpoints.Put(uint32(ep.Ifindex), val); err != nil {
		d.dropGeneration(in)
		d.dropGeneration(eg)
		return fmt.Errorf("switching endpoint %d: %w", ep.Ifindex, err)
	}
	return nil
}

// endpointValue is what the programs read for ep. A pod with exactly one
// IPv4 address carries it in the value, which spares its IPv4 packets the
// anti-spoofing lookup in xg_ep_addrs; every other address is found there.
func endpointValue(ep Endpoint, in, eg uint32) bpfobj.XgEndpoint {
	val := bpfobj.XgEndpoint{IngressPolicy: in, EgressPolicy: eg}
	if !ep.AnySource {
		val.Flags |= flagAntiSpoof
	}
	var v4 []netip.Addr
	for _, a := range ep.Addrs {
		if a = a.Unmap(); a.Is4() && !slices.Contains(v4, a) {
			v4 = append(v4, a)
		}
	}
	if len(v4) == 1 {
		val.Flags |= flagAddr4
		val.Addr4 = v4[0].As4()
	}
	return val
}

// Remove stops managing an interface: its programs are detached and its
// rules, addresses and tracked flows deleted.
func (d *Dataplane) Remove(ifindex int) error {
	return d.RemoveAll([]int{ifindex})
}

// RemoveAll removes several interfaces as Remove does, with one grace
// period and one pass over the tracked flows for all of them.
func (d *Dataplane) RemoveAll(ifindexes []int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.removeLocked(ifindexes)
}

func (d *Dataplane) removeLocked(ifindexes []int) error {
	if len(ifindexes) == 0 {
		return nil
	}
	var errs []error
	var ids []uint32
	gone := map[uint32]bool{}
	for _, ifindex := range ifindexes {
		gone[uint32(ifindex)] = true
		old, found := d.endpoint(ifindex)
		errs = append(errs, d.detach(ifindex))
		if !found {
			continue
		}
		if err := d.objs.XgEndpoints.Delete(uint32(ifindex)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, fmt.Errorf("deleting endpoint %d: %w", ifindex, err))
			continue
		}
		ids = append(ids, old.IngressPolicy, old.EgressPolicy)
	}
	errs = append(errs, d.retire(ids...))
	for _, ifindex := range ifindexes {
		errs = append(errs, d.removeStaleAddrs(Endpoint{Ifindex: ifindex}))
	}
	errs = append(errs, d.purgeFlows(gone))
	return errors.Join(errs...)
}
