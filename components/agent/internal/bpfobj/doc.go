// Package bpfobj embeds the dataplane's eBPF object, compiled from bpf/xg.c
// by bpf2go, with Go types for its maps' keys and values. Run
// hack/update-bpf.sh after changing anything under bpf/.
package bpfobj

//go:generate go tool bpf2go -tags linux -target bpfel -cflags "-O2 -g -Wall -Werror -mcpu=v3" -type xg_stat Xg ../../../../bpf/xg.c -- -I../../../../bpf/include -I../../../../bpf
