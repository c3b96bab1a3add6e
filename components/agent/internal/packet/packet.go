package packet

import (
	"encoding/binary"
	"net/netip"
)

// IP protocol numbers.
const (
	ICMP   = 1
	TCP    = 6
	UDP    = 17
	ICMPv6 = 58
	SCTP   = 132
)

// TCP flags.
const (
	FIN = 0x01
	SYN = 0x02
	RST = 0x04
	ACK = 0x10
)

// Frame describes one packet. The IP version follows Src.
type Frame struct {
	Src, Dst         netip.Addr
	Proto            uint8
	SrcPort, DstPort uint16 // TCP, UDP, SCTP
	Flags            uint8  // TCP
	ICMPType         uint8
	ICMPID           uint16
	// FragOffset, in 8-byte units, makes a non-first fragment (no L4
	// header) when non-zero.
	FragOffset uint16
	// HopByHop adds an IPv6 hop-by-hop options header.
	HopByHop bool
	// Payload follows the L4 header; for an ICMP error it is the quoted
	// packet, for example Frame.IP() of the packet that caused it.
	Payload []byte
}

// Bytes encodes the frame with an Ethernet header.
func (f Frame) Bytes() []byte {
	l4 := f.l4()
	eth := make([]byte, 14)
	copy(eth[0:6], []byte{0x02, 0, 0, 0, 0, 2})
	copy(eth[6:12], []byte{0x02, 0, 0, 0, 0, 1})
	if f.Src.Is4() {
		binary.BigEndian.PutUint16(eth[12:], 0x0800)
		return append(eth, f.ipv4(l4)...)
	}
	binary.BigEndian.PutUint16(eth[12:], 0x86dd)
	return append(eth, f.ipv6(l4)...)
}

// IP encodes the frame without the Ethernet header, as ICMP errors quote
// it.
func (f Frame) IP() []byte { return f.Bytes()[14:] }

// ARP returns an ARP request frame, which is not IP.
func ARP() []byte {
	b := make([]byte, 42)
	for i := range 6 {
		b[i] = 0xff
	}
	binary.BigEndian.PutUint16(b[12:], 0x0806)
	return b
}

func (f Frame) l4() []byte {
	if f.FragOffset != 0 {
		return append([]byte{0xde, 0xad, 0xbe, 0xef}, f.Payload...)
	}
	var h []byte
	switch f.Proto {
	case TCP:
		h = make([]byte, 20)
		binary.BigEndian.PutUint16(h[0:], f.SrcPort)
		binary.BigEndian.PutUint16(h[2:], f.DstPort)
		h[12] = 5 << 4
		h[13] = f.Flags
	case UDP:
		h = make([]byte, 8)
		binary.BigEndian.PutUint16(h[0:], f.SrcPort)
		binary.BigEndian.PutUint16(h[2:], f.DstPort)
		binary.BigEndian.PutUint16(h[4:], uint16(8+len(f.Payload)))
	case SCTP:
		h = make([]byte, 12)
		binary.BigEndian.PutUint16(h[0:], f.SrcPort)
		binary.BigEndian.PutUint16(h[2:], f.DstPort)
	case ICMP, ICMPv6:
		h = make([]byte, 8)
		h[0] = f.ICMPType
		binary.BigEndian.PutUint16(h[4:], f.ICMPID)
	}
	return append(h, f.Payload...)
}

func (f Frame) ipv4(l4 []byte) []byte {
	h := make([]byte, 20)
	h[0] = 0x45
	binary.BigEndian.PutUint16(h[2:], uint16(20+len(l4)))
	binary.BigEndian.PutUint16(h[6:], f.FragOffset&0x1fff)
	h[8] = 64
	h[9] = f.Proto
	src, dst := f.Src.As4(), f.Dst.As4()
	copy(h[12:], src[:])
	copy(h[16:], dst[:])
	return append(h, l4...)
}

func (f Frame) ipv6(l4 []byte) []byte {
	var ext []byte
	next := f.Proto
	if f.FragOffset != 0 {
		frag := make([]byte, 8)
		frag[0] = next
		binary.BigEndian.PutUint16(frag[2:], f.FragOffset<<3)
		ext, next = append(frag, ext...), 44
	}
	if f.HopByHop {
		hbh := make([]byte, 8)
		hbh[0] = next
		ext, next = append(hbh, ext...), 0
	}
	h := make([]byte, 40)
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:], uint16(len(ext)+len(l4)))
	h[6] = next
	h[7] = 64
	src, dst := f.Src.As16(), f.Dst.As16()
	copy(h[8:], src[:])
	copy(h[24:], dst[:])
	return append(append(h, ext...), l4...)
}
