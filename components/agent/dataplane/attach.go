//go:build linux

package dataplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// attachment holds the two tc attachments of one interface.
type attachment struct {
	ifindex int
	tcx     []link.Link // TCX mode: ingress and egress links, pinned
	clsact  bool        // clsact mode: filters live in the kernel
}

// Filter identity in clsact mode: ours comes first and is replaced in place.
const (
	clsactPriority = 1
	clsactHandle   = 1
	clsactName     = "xila-guard"
)

func resolveMode(m AttachMode) (AttachMode, error) {
	if m != AttachAuto {
		return m, nil
	}
	ok, err := tcxSupported()
	if err != nil {
		return 0, err
	}
	if ok {
		return AttachTCX, nil
	}
	return AttachClsact, nil
}

// tcxSupported asks the kernel to attach a throwaway program to interface
// 0, which does not exist: cilium/ebpf turns the failure into
// ErrNotSupported only when the kernel has no TCX at all.
func tcxSupported() (bool, error) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1), asm.Return()},
	})
	if err != nil {
		return false, fmt.Errorf("loading tc probe program: %w", err)
	}
	defer prog.Close()
	l, err := link.AttachTCX(link.TCXOptions{Interface: 0, Program: prog, Attach: ebpf.AttachTCXIngress})
	if err == nil {
		l.Close()
	}
	return !errors.Is(err, ebpf.ErrNotSupported), nil
}

func (d *Dataplane) linkPin(ifindex int, dir string) string {
	return filepath.Join(d.cfg.PinPath, "links", fmt.Sprintf("tcx-%d-%s", ifindex, dir))
}

// attach puts both programs on the interface, or, when they are there
// already, switches them to this agent's program instances.
func (d *Dataplane) attach(ifindex int) error {
	if _, ok := d.links[ifindex]; ok {
		return nil
	}
	a := &attachment{ifindex: ifindex}
	if d.mode == AttachClsact {
		if err := attachClsact(ifindex, d.objs.XgFromPod, d.objs.XgToPod); err != nil {
			return err
		}
		a.clsact = true
		d.links[ifindex] = a
		return nil
	}
	for _, t := range []struct {
		dir  string
		prog *ebpf.Program
		at   ebpf.AttachType
	}{
		{"ingress", d.objs.XgFromPod, ebpf.AttachTCXIngress},
		{"egress", d.objs.XgToPod, ebpf.AttachTCXEgress},
	} {
		l, err := d.tcxLink(ifindex, t.dir, t.prog, t.at)
		if err != nil {
			a.close()
			return err
		}
		a.tcx = append(a.tcx, l)
	}
	d.links[ifindex] = a
	return nil
}

func (d *Dataplane) tcxLink(ifindex int, dir string, prog *ebpf.Program, at ebpf.AttachType) (link.Link, error) {
	pin := d.linkPin(ifindex, dir)
	if l, err := link.LoadPinnedLink(pin, nil); err == nil {
		// Swap the program atomically: no packet goes unfiltered.
		if attachedTo(l) == ifindex && l.Update(prog) == nil {
			return l, nil
		}
		// The link outlived its interface (the index is now another
		// interface's): drop it and attach afresh.
		l.Unpin()
		l.Close()
	}
	l, err := link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: prog, Attach: at, Anchor: link.Head()})
	if err != nil {
		return nil, fmt.Errorf("attaching tcx %s to interface %d: %w", dir, ifindex, err)
	}
	if err := l.Pin(pin); err != nil {
		l.Close()
		return nil, fmt.Errorf("pinning tcx %s link of interface %d: %w", dir, ifindex, err)
	}
	return l, nil
}

// attachedTo returns the interface a tcx link is attached to, 0 once that
// interface is gone.
func attachedTo(l link.Link) int {
	info, err := l.Info()
	if err != nil || info.TCX() == nil {
		return 0
	}
	return int(info.TCX().Ifindex)
}

// adoptLinks takes over the links a previous agent pinned, moving them to
// this agent's programs, and unpins links of interfaces that are gone.
func (d *Dataplane) adoptLinks() error {
	entries, err := os.ReadDir(filepath.Join(d.cfg.PinPath, "links"))
	if err != nil {
		return fmt.Errorf("listing pinned links: %w", err)
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "tcx-")
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(rest, "-")
		ifindex, err := strconv.Atoi(num)
		if err != nil {
			continue
		}
		if !interfaceExists(ifindex) {
			os.Remove(filepath.Join(d.cfg.PinPath, "links", e.Name()))
			continue
		}
		if _, found := d.endpoint(ifindex); found && d.links[ifindex] == nil && d.mode == AttachTCX {
			if err := d.attach(ifindex); err != nil {
				return err
			}
		}
	}
	return nil
}

// detach removes the programs from an interface, if it still exists.
func (d *Dataplane) detach(ifindex int) error {
	var errs []error
	if a, ok := d.links[ifindex]; ok {
		for _, l := range a.tcx {
			errs = append(errs, l.Unpin(), l.Close())
		}
		delete(d.links, ifindex)
	}
	for _, dir := range []string{"ingress", "egress"} {
		if err := os.Remove(d.linkPin(ifindex, dir)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if d.mode == AttachClsact && interfaceExists(ifindex) {
		errs = append(errs, detachClsact(ifindex))
	}
	return errors.Join(errs...)
}

func (a *attachment) close() error {
	var errs []error
	for _, l := range a.tcx {
		errs = append(errs, l.Close()) // pinned: stays attached
	}
	return errors.Join(errs...)
}

func clsactFilter(ifindex int, parent uint32, fd int) *netlink.BpfFilter {
	return &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{
			LinkIndex: ifindex, Parent: parent, Handle: clsactHandle,
			Priority: clsactPriority, Protocol: unix.ETH_P_ALL,
		},
		Fd: fd, Name: clsactName, DirectAction: true,
	}
}

// attachClsact adds (or replaces in place) our filters. A replaced filter
// switches programs atomically, and filters outlive the agent by design.
func attachClsact(ifindex int, fromPod, toPod *ebpf.Program) error {
	qdisc := &netlink.GenericQdisc{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: ifindex, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT},
		QdiscType:  "clsact",
	}
	if err := netlink.QdiscReplace(qdisc); err != nil {
		return fmt.Errorf("adding clsact qdisc to interface %d: %w", ifindex, err)
	}
	if err := netlink.FilterReplace(clsactFilter(ifindex, netlink.HANDLE_MIN_INGRESS, fromPod.FD())); err != nil {
		return fmt.Errorf("adding ingress filter to interface %d: %w", ifindex, err)
	}
	if err := netlink.FilterReplace(clsactFilter(ifindex, netlink.HANDLE_MIN_EGRESS, toPod.FD())); err != nil {
		return fmt.Errorf("adding egress filter to interface %d: %w", ifindex, err)
	}
	return nil
}

func detachClsact(ifindex int) error {
	var errs []error
	for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
		if err := netlink.FilterDel(clsactFilter(ifindex, parent, 0)); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("removing filter from interface %d: %w", ifindex, err))
		}
	}
	return errors.Join(errs...)
}
