//go:build linux

package dataplane

import (
	"fmt"
	"path/filepath"

	"github.com/cilium/ebpf/link"
)

// postNATPriorities place xg_post_nat after DNAT (PREROUTING, -100) in the
// hooks it uses; in FORWARD and LOCAL_IN any priority is, and these run it
// just after the iptables filter table. The kernel allows one BPF program
// per hook and priority, so a new agent takes the one its predecessor does
// not hold.
var postNATPriorities = [2]int32{1, 2}

var postNATHooks = []struct {
	name   string
	hook   link.NetfilterInetHook
	family link.NetfilterProtocolFamily
}{
	{"forward-ipv4", link.NetfilterInetForward, link.NetfilterProtoIPv4},
	{"forward-ipv6", link.NetfilterInetForward, link.NetfilterProtoIPv6},
	{"input-ipv4", link.NetfilterInetLocalIn, link.NetfilterProtoIPv4},
	{"input-ipv6", link.NetfilterInetLocalIn, link.NetfilterProtoIPv6},
}

// attachNetfilter attaches xg_post_nat to every hook and pins the links.
// Netfilter links cannot switch programs in place, so a link pinned by a
// previous agent is replaced only after the new one is attached: for a
// moment both run, never neither.
func (d *Dataplane) attachNetfilter() error {
	for _, h := range postNATHooks {
		pin := filepath.Join(d.cfg.PinPath, "links", "nf-"+h.name)
		old, _ := link.LoadPinnedLink(pin, nil)
		prio := postNATPriorities[0]
		if old != nil {
			if info, err := old.Info(); err == nil && info.Netfilter() != nil && info.Netfilter().Priority == prio {
				prio = postNATPriorities[1]
			}
		}
		l, err := link.AttachNetfilter(link.NetfilterOptions{
			Program: d.objs.XgPostNat, ProtocolFamily: h.family, Hook: h.hook, Priority: prio,
		})
		if err != nil {
			if old != nil {
				old.Close()
			}
			return fmt.Errorf("attaching post-DNAT program to %s: %w", h.name, err)
		}
		if old != nil {
			if err := old.Unpin(); err != nil {
				old.Close()
				l.Close()
				return fmt.Errorf("unpinning old %s link: %w", h.name, err)
			}
			old.Close()
		}
		if err := l.Pin(pin); err != nil {
			l.Close()
			return fmt.Errorf("pinning %s link: %w", h.name, err)
		}
		d.nf = append(d.nf, l)
	}
	return nil
}
