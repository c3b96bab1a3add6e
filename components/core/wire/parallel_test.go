package wire

import (
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/xila-guard/xila-guard/components/core/internal/strictjson"
)

// withParallel makes every list of nodes a candidate for decoding in two
// halves, on at least two CPUs, for the rest of the test.
func withParallel(t testing.TB) { lowerOnTwoCPUs(t, &parallelBytes, 1) }

// lowerOnTwoCPUs sets the threshold *v to low and runs on at least two
// CPUs for the rest of the test, so that work meant for large requests
// is split for small ones.
func lowerOnTwoCPUs(t testing.TB, v *int, low int) {
	t.Helper()
	saved := *v
	procs := runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0)))
	*v = low
	t.Cleanup(func() {
		*v = saved
		runtime.GOMAXPROCS(procs)
	})
}

// sequential decodes text in order, as a reference.
func sequential(t *testing.T, text string) (*EvaluateRequest, error) {
	t.Helper()
	saved := parallelBytes
	parallelBytes = len(text) + 1
	defer func() { parallelBytes = saved }()
	var d requestDecoder
	return d.decode(text)
}

// manyNodes is a request of n nodes with devices and TEEs, encoded
// compactly as clients send it.
func manyNodes(n int) string {
	req := fullRequest()
	node := req.Nodes[0]
	state := *node.State
	second := state.Devices[0]
	second.ID = "gpu-1"
	state.Devices = append(state.Devices, second)
	node.State = &state
	req.Nodes = req.Nodes[:0]
	for i := range n {
		node.Name = "node-" + strings.Repeat("x", i%5) + strconv.Itoa(i)
		req.Nodes = append(req.Nodes, node)
	}
	return string(AppendRequest(nil, req))
}

// TestDecodeNodesInTwoHalves checks that a long list decoded in two
// halves gives the same request as one decoded in order, and that the
// second half was in fact decoded apart.
func TestDecodeNodesInTwoHalves(t *testing.T) {
	withParallel(t)
	text := manyNodes(2000)
	want, err := sequential(t, text)
	if err != nil {
		t.Fatal(err)
	}
	var d requestDecoder
	for range 3 { // and again, reusing the decoder and its second half
		got, err := d.decode(text)
		compare(t, "request", []byte(text[:80]), want, nil, got, err)
	}
	if d.handOffs != 3 {
		t.Fatalf("%d of 3 decodes used the second half decoded apart", d.handOffs)
	}
	small, err := d.decode(`{"nodes":[{"name":"a"},{"name":"b"}]}`)
	if err != nil || len(small.Nodes) != 2 || small.Nodes[0].State != nil || small.Nodes[1].State != nil {
		t.Fatalf("a small request after large ones: %+v, %v", small, err)
	}
}

// TestDecodeNodesInTwoHalvesErrors breaks the list in its second half, or
// plants the pattern the split looks for where no element of the list
// begins: the error, path and offset included, must be the one reading in
// order finds.
func TestDecodeNodesInTwoHalvesErrors(t *testing.T) {
	withParallel(t)
	text := manyNodes(400)
	last := strings.LastIndex(text, `"sharingMode":`)
	// The first boundary between two devices after the middle, where the
	// split looks first: a device that begins like a node.
	device := len(text)/2 + strings.Index(text[len(text)/2:], `},{"id":`) + 3
	for name, broken := range map[string]string{
		"unknown field late":              text[:last] + `"sharingMod":` + text[last+len(`"sharingMode":`):],
		"truncated":                       text[:len(text)-40],
		"device that looks like a node":   text[:device] + `"name"` + text[device+len(`"id"`):],
		"second half after trailing data": text + ` {}`,
		"device named like a node late":   text[:last] + `"name":"x",` + text[last:],
	} {
		t.Run(name, func(t *testing.T) {
			_, want := sequential(t, broken)
			var d requestDecoder
			_, got := d.decode(broken)
			var we, ge *strictjson.Error
			if want == nil || got == nil {
				t.Fatalf("in order: %v; in halves: %v; want both to fail", want, got)
			}
			if !asError(want, &we) || !asError(got, &ge) || *we != *ge {
				t.Fatalf("in halves: %v\nin order: %v", got, want)
			}
		})
	}
}

func asError(err error, target **strictjson.Error) bool {
	e, ok := err.(*strictjson.Error)
	*target = e
	return ok
}

// BenchmarkRequestDecoderHalves compares decoding a 5,000-node list in
// two halves with decoding it in order, in the same binary.
func BenchmarkRequestDecoderHalves(b *testing.B) {
	text := manyNodes(5000)
	for _, c := range []struct {
		name  string
		bytes int
	}{{"in-order", len(text) + 1}, {"halves", 256 << 10}} {
		b.Run(c.name, func(b *testing.B) {
			saved := parallelBytes
			parallelBytes = c.bytes
			defer func() { parallelBytes = saved }()
			b.SetBytes(int64(len(text)))
			var d requestDecoder
			for b.Loop() {
				if _, err := d.decode(text); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestDecodeResultsInTwoHalves decodes a long answer in two halves: the
// same answer as the reflective decoder's, with the second half decoded
// apart; and a break in the second half gives the error reading in order
// gives.
func TestDecodeResultsInTwoHalves(t *testing.T) {
	withParallel(t)
	resp := fullResponse()
	one := resp.Results[0]
	resp.Results = resp.Results[:0]
	for i := range 3000 {
		one.Node = "node-" + strconv.Itoa(i)
		resp.Results = append(resp.Results, one)
	}
	text := string(AppendResponse(nil, resp))
	var want EvaluateResponse
	if err := strictjson.Unmarshal([]byte(text), &want, strictjson.IgnoreUnknownFields()); err != nil {
		t.Fatal(err)
	}
	d := responseDecoder{expect: 3000}
	got, err := d.decode(text)
	compare(t, "answer", []byte(text[:80]), &want, nil, got, err)
	if d.handOffs != 1 {
		t.Fatalf("the second half was not decoded apart (%d hand-offs)", d.handOffs)
	}
	last := strings.LastIndex(text, `"decision":`)
	for name, broken := range map[string]string{
		"duplicate key late": text[:last] + `"decision":"allow",` + text[last:],
		"truncated":          text[:len(text)-30],
	} {
		var we EvaluateResponse
		want := strictjson.Unmarshal([]byte(broken), &we, strictjson.IgnoreUnknownFields())
		d := responseDecoder{expect: 3000}
		_, got := d.decode(broken)
		var wantErr, gotErr *strictjson.Error
		if want == nil || !asError(want, &wantErr) || !asError(got, &gotErr) || *wantErr != *gotErr {
			t.Errorf("%s: in halves: %v\nreflective: %v", name, got, want)
		}
	}
}
