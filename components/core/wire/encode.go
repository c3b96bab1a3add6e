package wire

import (
	"runtime"
	"strconv"
	"sync"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// AppendRequest appends the JSON encoding of r to b. The output is byte for
// byte what encoding/json produces for r, which the tests check, only
// several times faster: a scheduler sends the evidence of thousands of
// nodes per call, and reflection would dominate its latency.
//
// Adding a field to a wire or API type means adding it here; the tests fail
// until then.
func AppendRequest(b []byte, r *EvaluateRequest) []byte {
	b = append(b, '{')
	if r.Profile != "" {
		b = appendKey(b, `"profile":`, string(r.Profile))
		b = append(b, ',')
	}
	b = append(b, `"pod":{"namespace":`...)
	b = appendString(b, r.Pod.Namespace)
	if r.Pod.Name != "" {
		b = appendKey(b, `,"name":`, r.Pod.Name)
	}
	if r.Pod.UID != "" {
		b = appendKey(b, `,"uid":`, string(r.Pod.UID))
	}
	b = append(b, '}')
	if t := r.Tenant; t != nil {
		b = appendKey(b, `,"tenant":{"id":`, t.ID)
		if t.Pool != "" {
			b = appendKey(b, `,"pool":`, t.Pool)
		}
		b = append(b, '}')
	}
	if p := r.Policy; p != nil {
		b = appendKey(b, `,"policy":{"name":`, p.Name)
		b = append(b, `,"spec":`...)
		b = appendPolicySpec(b, &p.Spec)
		b = append(b, '}')
	}
	b = append(b, `,"nodes":`...)
	if r.Nodes == nil {
		return append(b, "null}"...)
	}
	b = append(b, '[')
	nodes := r.Nodes
	if len(nodes) >= parallelEncodeNodes && runtime.GOMAXPROCS(0) > 1 {
		// The second half is encoded on another CPU meanwhile, into a
		// recycled buffer, and appended: one copy instead of half the
		// encoding.
		half := len(nodes) / 2
		tail := tailBuffers.Get().(*[]byte)
		done := make(chan struct{})
		go func() {
			defer close(done)
			*tail = appendNodes((*tail)[:0], nodes[half:], true)
		}()
		b = appendNodes(b, nodes[:half], false)
		<-done
		b = append(b, *tail...)
		tailBuffers.Put(tail)
	} else {
		b = appendNodes(b, nodes, false)
	}
	return append(b, "]}"...)
}

// parallelEncodeNodes is how many nodes make it worth encoding the second
// half of a request's list on another CPU.
var parallelEncodeNodes = 512

var tailBuffers = sync.Pool{New: func() any { return new([]byte) }}

// appendNodes appends nodes separated by commas, with a comma before the
// first when more follows a list already begun.
func appendNodes(b []byte, nodes []Node, more bool) []byte {
	for i := range nodes {
		if i > 0 || more {
			b = append(b, ',')
		}
		b = appendNode(b, &nodes[i])
	}
	return b
}

func appendNode(b []byte, n *Node) []byte {
	b = appendKey(b, `{"name":`, n.Name)
	if n.UID != "" {
		b = appendKey(b, `,"uid":`, string(n.UID))
	}
	if n.Pool != "" {
		b = appendKey(b, `,"pool":`, n.Pool)
	}
	if c := n.AllocatableGPUs; c != nil {
		b = strconv.AppendInt(append(b, `,"allocatableGPUs":`...), *c, 10)
	}
	if s := n.State; s != nil {
		b = append(b, `,"state":`...)
		b = appendState(b, s)
	}
	return append(b, '}')
}

func appendPolicySpec(b []byte, s *v1alpha1.PlacementPolicySpec) []byte {
	b = append(b, '{')
	if s.Confinement != "" {
		b = appendKey(b, `"confinement":`, string(s.Confinement))
		b = append(b, ',')
	}
	b = append(b, `"evidence":{"acceptedSources":`...)
	b = appendStrings(b, s.Evidence.AcceptedSources)
	if s.Evidence.MaxAge != nil {
		b = appendKey(b, `,"maxAge":`, s.Evidence.MaxAge.Duration.String())
	}
	b = append(b, '}')
	if g := s.GPUSharing; g != nil {
		b = append(b, `,"gpuSharing":{`...)
		sep := ""
		if len(g.AllowedModes) > 0 {
			b = appendStrings(append(b, `"allowedModes":`...), g.AllowedModes)
			sep = ","
		}
		if len(g.ForbiddenModes) > 0 {
			b = appendStrings(append(append(b, sep...), `"forbiddenModes":`...), g.ForbiddenModes)
		}
		b = append(b, '}')
	}
	if cc := s.ConfidentialComputing; cc != nil {
		b = append(b, `,"confidentialComputing":`...)
		b = appendConfidentialComputing(b, cc)
	}
	if s.PodSecurity != "" {
		b = appendKey(b, `,"podSecurity":`, string(s.PodSecurity))
	}
	return append(b, '}')
}

func appendConfidentialComputing(b []byte, cc *v1alpha1.ConfidentialComputingPolicy) []byte {
	b = append(b, '{')
	first := true
	field := func(name string) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, name...)
	}
	if len(cc.TEETypes) > 0 {
		field(`"teeTypes":`)
		b = appendStrings(b, cc.TEETypes)
	}
	if cc.GPUCCMode != "" {
		field(`"gpuCCMode":`)
		b = appendString(b, string(cc.GPUCCMode))
	}
	if len(cc.AllowedMeasurements) > 0 {
		field(`"allowedMeasurements":`)
		b = appendStrings(b, cc.AllowedMeasurements)
	}
	if cc.RequireAttestation {
		field(`"requireAttestation":true`)
	}
	if cc.MaxAttestationAge != nil {
		field(`"maxAttestationAge":`)
		b = appendString(b, cc.MaxAttestationAge.Duration.String())
	}
	return append(b, '}')
}

func appendState(b []byte, s *v1alpha1.NodeSecurityStateSpec) []byte {
	b = appendKey(b, `{"nodeUID":`, string(s.NodeUID))
	b = appendKey(b, `,"incarnation":`, s.Incarnation)
	b = appendTime(append(b, `,"observedAt":`...), s.ObservedAt)
	b = appendKey(b, `,"source":`, string(s.Source))
	if s.Complete {
		b = append(b, `,"complete":true`...)
	} else {
		b = append(b, `,"complete":false`...)
	}
	if len(s.Devices) > 0 {
		b = append(b, `,"devices":[`...)
		for i := range s.Devices {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendDevice(b, &s.Devices[i])
		}
		b = append(b, ']')
	}
	if t := s.TEE; t != nil {
		b = appendKey(b, `,"tee":{"type":`, string(t.Type))
		if t.Measurement != "" {
			b = appendKey(b, `,"measurement":`, string(t.Measurement))
		}
		if a := t.Attestation; a != nil {
			b = appendKey(b, `,"attestation":{"verdict":`, string(a.Verdict))
			b = appendTime(append(b, `,"verifiedAt":`...), a.VerifiedAt)
			if a.Verifier != "" {
				b = appendKey(b, `,"verifier":`, a.Verifier)
			}
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

func appendDevice(b []byte, d *v1alpha1.GPUDevice) []byte {
	b = appendKey(b, `{"id":`, d.ID)
	if d.Vendor != "" {
		b = appendKey(b, `,"vendor":`, d.Vendor)
	}
	if d.Model != "" {
		b = appendKey(b, `,"model":`, d.Model)
	}
	if d.MIG {
		b = append(b, `,"mig":true`...)
	}
	if d.SharingMode != "" {
		b = appendKey(b, `,"sharingMode":`, string(d.SharingMode))
	}
	if d.MIGProfile != "" {
		b = appendKey(b, `,"migProfile":`, d.MIGProfile)
	}
	if d.CCMode != "" {
		b = appendKey(b, `,"ccMode":`, string(d.CCMode))
	}
	return append(b, '}')
}

// appendKey appends a key (with its punctuation) and a string value.
func appendKey(b []byte, key, value string) []byte {
	return appendString(append(b, key...), value)
}

// appendStrings appends a list of strings, null when nil; lists marked
// omitempty are left out by the callers when empty.
func appendStrings[T ~string](b []byte, values []T) []byte {
	if values == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, v := range values {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, string(v))
	}
	return append(b, ']')
}
