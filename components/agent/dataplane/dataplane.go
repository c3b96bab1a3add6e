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

// Apply installs a pod's compiled rule sets and attaches the programs to its
// interface. The switch from the previous rules is atomic per pod. If the
// rules cannot be installed (a full map, a port set over the limit), the pod
// is switched to deny-all and the error wraps ErrDenyAll.
func (d *Dataplane) Apply(ep Endpoint, ingress, egress rules.RuleSet) error {
	if ep.Ifindex <= 0 {
		return fmt.Errorf("endpoint has no interface index")
	}
	if len(ep.Addrs) == 0 && !ep.AnySource {
		return fmt.Errorf("endpoint %d has no addresses: every packet from it would count as spoofed", ep.Ifindex)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	old, _ := d.endpoint(ep.Ifindex)
	in, err := d.writeGeneration(ingress)
	if err != nil {
		return d.denyAll(ep, old, fmt.Errorf("ingress rules: %w", err))
	}
	eg, err := d.writeGeneration(egress)
	if err != nil {
		d.dropGeneration(in)
		return d.denyAll(ep, old, fmt.Errorf("egress rules: %w", err))
	}
	return d.install(ep, old, in, eg)
}

func (d *Dataplane) denyAll(ep Endpoint, old bpfobj.XgEndpoint, cause error) error {
	if err := d.install(ep, old, policyDenyAll, policyDenyAll); err != nil {
		return errors.Join(fmt.Errorf("%w: %w", ErrDenyAll, cause), err)
	}
	return fmt.Errorf("%w: %w", ErrDenyAll, cause)
}

// install switches the endpoint to the given policy ids and retires the
// ids it had before.
func (d *Dataplane) install(ep Endpoint, old bpfobj.XgEndpoint, in, eg uint32) error {
	if err := d.addAddrs(ep); err != nil {
		return err
	}
	val := endpointValue(ep, in, eg)
	if err := d.objs.XgEndpoints.Put(uint32(ep.Ifindex), val); err != nil {
		d.dropGeneration(in)
		d.dropGeneration(eg)
		return fmt.Errorf("switching endpoint %d: %w", ep.Ifindex, err)
	}
	retireErr := d.retire(old.IngressPolicy, old.EgressPolicy)
	return errors.Join(retireErr, d.removeStaleAddrs(ep), d.attach(ep.Ifindex))
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
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.removeLocked(ifindex)
}

func (d *Dataplane) removeLocked(ifindex int) error {
	old, found := d.endpoint(ifindex)
	var errs []error
	errs = append(errs, d.detach(ifindex))
	if found {
		if err := d.objs.XgEndpoints.Delete(uint32(ifindex)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, fmt.Errorf("deleting endpoint %d: %w", ifindex, err))
		}
		errs = append(errs, d.retire(old.IngressPolicy, old.EgressPolicy))
	}
	errs = append(errs, d.removeStaleAddrs(Endpoint{Ifindex: ifindex}), d.purgeFlows(ifindex))
	return errors.Join(errs...)
}
