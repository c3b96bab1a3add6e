// Package packet builds Ethernet frames by hand for BPF_PROG_TEST_RUN tests:
// IPv4 and IPv6, TCP, UDP, SCTP and ICMP, fragments and extension headers.
// Checksums are left zero; the programs under test never read them.
package packet
