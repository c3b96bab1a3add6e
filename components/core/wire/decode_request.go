package wire

import (
	"runtime"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/internal/strictjson"
)

// The members of each object, in the order of the fields of its Go type;
// TestFieldTables checks them against the types.
var (
	requestFields     = strictjson.NewFields("profile", "pod", "tenant", "policy", "nodes")
	podFields         = strictjson.NewFields("namespace", "name", "uid")
	tenantFields      = strictjson.NewFields("id", "pool")
	policyFields      = strictjson.NewFields("name", "spec")
	policySpecFields  = strictjson.NewFields("confinement", "evidence", "gpuSharing", "confidentialComputing", "podSecurity")
	evidenceFields    = strictjson.NewFields("acceptedSources", "maxAge")
	sharingFields     = strictjson.NewFields("allowedModes", "forbiddenModes")
	ccFields          = strictjson.NewFields("teeTypes", "gpuCCMode", "allowedMeasurements", "requireAttestation", "maxAttestationAge")
	nodeFields        = strictjson.NewFields("name", "uid", "pool", "allocatableGPUs", "state")
	stateFields       = strictjson.NewFields("nodeUID", "incarnation", "observedAt", "source", "complete", "devices", "tee")
	deviceFields      = strictjson.NewFields("id", "vendor", "model", "mig", "sharingMode", "migProfile", "ccMode")
	teeFields         = strictjson.NewFields("type", "measurement", "attestation")
	attestationFields = strictjson.NewFields("verdict", "verifiedAt", "verifier")
)

// decodeRequest decodes a request body without reflection. It accepts and
// refuses exactly what strictjson.Unmarshal does for an EvaluateRequest,
// with the same errors, and builds the same value; the differential fuzz
// test FuzzTypedDecoders checks that. It is several times faster, and
// the evidence of all nodes lives in a few large blocks rather than in
// several small allocations per node.
func decodeRequest(text string) (*EvaluateRequest, error) {
	var d requestDecoder
	return d.decode(text)
}

// requestDecoder reads requests. Values that every node has are carved
// from blocks that grow with the request, so that a request of thousands
// of nodes costs tens of allocations, not tens of thousands; a decoder
// that is used again carves the next request from the same blocks, so
// that it costs none.
type requestDecoder struct {
	r            *strictjson.Reader
	req          EvaluateRequest
	nodeBuf      []Node
	nodesUsed    int
	counts       block[int64]
	states       block[v1alpha1.NodeSecurityStateSpec]
	tees         block[v1alpha1.TEEFacts]
	attestations block[v1alpha1.Attestation]
	devices      []v1alpha1.GPUDevice

	// text is the request being decoded.
	text string
	// tail decodes the second half of a long list of nodes; see nodes.
	tail *requestDecoder
	// handOffs counts the lists whose second half tail decoded.
	handOffs int
}

// decode reads one request into the decoder's own memory, after clearing
// what the previous request left there: nothing of an earlier request can
// show through in the next.
func (d *requestDecoder) decode(text string) (*EvaluateRequest, error) {
	d.reset()
	d.text = text
	d.r = strictjson.NewReader(text)
	if err := d.r.Begin(); err != nil {
		return nil, err
	}
	if err := d.request(&d.req); err != nil {
		return nil, err
	}
	if err := d.r.End(); err != nil {
		return nil, err
	}
	return &d.req, nil
}

// reset zeroes everything the last request used and keeps the memory.
func (d *requestDecoder) reset() {
	clear(d.nodeBuf[:d.nodesUsed])
	d.nodesUsed = 0
	d.req = EvaluateRequest{}
	clear(d.devices)
	d.devices = d.devices[:0]
	d.counts.reset()
	d.states.reset()
	d.tees.reset()
	d.attestations.reset()
	d.r = nil
	d.text = ""
	if d.tail != nil {
		d.tail.reset()
	}
}

func (d *requestDecoder) request(req *EvaluateRequest) error {
	r := d.r
	return r.Object(requestFields, func(i int) error {
		switch i {
		case 0:
			s, err := r.String()
			req.Profile = guard.Profile(s)
			return err
		case 1:
			return d.pod(&req.Pod)
		case 2:
			if null, err := r.Null(); null || err != nil {
				req.Tenant = nil
				return err
			}
			req.Tenant = new(Tenant)
			return d.tenant(req.Tenant)
		case 3:
			if null, err := r.Null(); null || err != nil {
				req.Policy = nil
				return err
			}
			req.Policy = new(Policy)
			return d.policy(req.Policy)
		default:
			return d.nodes(req)
		}
	})
}

func (d *requestDecoder) pod(p *Pod) error {
	r := d.r
	return r.Object(podFields, func(i int) error {
		s, err := r.String()
		switch i {
		case 0:
			p.Namespace = s
		case 1:
			p.Name = s
		default:
			p.UID = types.UID(s)
		}
		return err
	})
}

func (d *requestDecoder) tenant(t *Tenant) error {
	r := d.r
	return r.Object(tenantFields, func(i int) error {
		s, err := r.String()
		if i == 0 {
			t.ID = s
		} else {
			t.Pool = s
		}
		return err
	})
}

func (d *requestDecoder) policy(p *Policy) error {
	r := d.r
	return r.Object(policyFields, func(i int) error {
		if i == 0 {
			s, err := r.String()
			p.Name = s
			return err
		}
		return d.policySpec(&p.Spec)
	})
}

func (d *requestDecoder) policySpec(s *v1alpha1.PlacementPolicySpec) error {
	r := d.r
	return r.Object(policySpecFields, func(i int) error {
		switch i {
		case 0:
			v, err := r.String()
			s.Confinement = v1alpha1.Confinement(v)
			return err
		case 1:
			return d.evidence(&s.Evidence)
		case 2:
			if null, err := r.Null(); null || err != nil {
				s.GPUSharing = nil
				return err
			}
			s.GPUSharing = new(v1alpha1.GPUSharingPolicy)
			return d.sharing(s.GPUSharing)
		case 3:
			if null, err := r.Null(); null || err != nil {
				s.ConfidentialComputing = nil
				return err
			}
			s.ConfidentialComputing = new(v1alpha1.ConfidentialComputingPolicy)
			return d.confidentialComputing(s.ConfidentialComputing)
		default:
			v, err := r.String()
			s.PodSecurity = v1alpha1.PodSecurityLevel(v)
			return err
		}
	})
}

func (d *requestDecoder) evidence(e *v1alpha1.EvidencePolicy) error {
	r := d.r
	return r.Object(evidenceFields, func(i int) error {
		if i == 0 {
			return readStrings(r, &e.AcceptedSources)
		}
		return readDuration(r, &e.MaxAge)
	})
}

func (d *requestDecoder) sharing(g *v1alpha1.GPUSharingPolicy) error {
	r := d.r
	return r.Object(sharingFields, func(i int) error {
		if i == 0 {
			return readStrings(r, &g.AllowedModes)
		}
		return readStrings(r, &g.ForbiddenModes)
	})
}

func (d *requestDecoder) confidentialComputing(cc *v1alpha1.ConfidentialComputingPolicy) error {
	r := d.r
	return r.Object(ccFields, func(i int) error {
		switch i {
		case 0:
			return readStrings(r, &cc.TEETypes)
		case 1:
			s, err := r.String()
			cc.GPUCCMode = v1alpha1.GPUCCMode(s)
			return err
		case 2:
			return readStrings(r, &cc.AllowedMeasurements)
		case 3:
			b, err := r.Bool()
			cc.RequireAttestation = b
			return err
		default:
			return readDuration(r, &cc.MaxAttestationAge)
		}
	})
}

func (d *requestDecoder) nodes(req *EvaluateRequest) error {
	list := d.nodeBuf[:0]
	elem := func(i int) error {
		list = append(list, Node{})
		return d.node(&list[i])
	}
	var present bool
	var err error
	if at := d.splitAt(); at < 0 {
		present, err = d.r.Array(elem)
	} else {
		// The second half of a long list is decoded on another CPU
		// meanwhile, into a decoder of its own. Its work is used only if
		// this decoder, reading in order, arrives exactly where it began,
		// at the start of an element; otherwise, or if it failed, this
		// decoder reads on by itself and reports what it finds there.
		if d.tail == nil {
			d.tail = new(requestDecoder)
		}
		t := d.tail // reset with d at the start of decode
		present, err = inHalves(d.r, at, elem,
			func() (int, error) { return t.elements(d.text, at) },
			func() {
				list = append(list, t.nodeBuf[:t.nodesUsed]...)
				d.handOffs++
			})
	}
	if cap(list) > cap(d.nodeBuf) {
		d.nodeBuf = list[:0]
	}
	d.nodesUsed = len(list)
	switch {
	case !present:
		req.Nodes = nil
	case list == nil:
		req.Nodes = []Node{}
	default:
		req.Nodes = list
	}
	return err
}

// inHalves reads a list with r and elem while tail, on another goroutine,
// decodes the same list from offset at to its end. When r arrives exactly
// at at, at the start of an element, and tail succeeded, take adds tail's
// elements and r goes on after the list; otherwise r reads the rest
// itself. inHalves returns only once tail has finished, so that nothing
// still writes into memory the caller may reuse.
func inHalves(r *strictjson.Reader, at int, elem func(i int) error, tail func() (int, error), take func()) (bool, error) {
	var end int
	var tailErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		end, tailErr = tail()
	}()
	present, err := r.ArrayHandOff(at, elem, func(int) (int, bool) {
		<-done
		if tailErr != nil {
			return 0, false
		}
		take()
		return end, true
	})
	<-done
	return present, err
}

// parallelBytes is how long the rest of a request must be where its list
// of nodes begins for the second half of the list to be decoded on
// another CPU: about 500 nodes.
var parallelBytes = 256 << 10

// splitAt returns where, about halfway through the rest of the request,
// an element of the list of nodes may begin; see splitList.
func (d *requestDecoder) splitAt() int {
	return splitList(d.text, d.r.Pos(), nodeFields)
}

// splitList returns where, about halfway through text after pos, an
// element of a list of objects with these fields may begin: the "{" of a
// "},{" followed by one of the fields. In a valid document such a "{"
// always begins an object in a list, but not necessarily in the list
// meant, which the caller's hand-off checks. It returns -1 when the rest
// is too short to be worth decoding on two CPUs, or no such place is
// found.
func splitList(text string, pos int, fields *strictjson.Fields) int {
	rest := len(text) - pos
	if rest < parallelBytes || runtime.GOMAXPROCS(0) < 2 {
		return -1
	}
	from := pos + rest/2
	for range 64 {
		i := strings.Index(text[from:], `},{"`)
		if i < 0 {
			return -1
		}
		at := from + i + 2
		key := text[at+2:]
		for _, name := range fields.Names() {
			if strings.HasPrefix(key, name) && strings.HasPrefix(key[len(name):], `":`) {
				return at
			}
		}
		from = at
	}
	return -1
}

// elements decodes nodes from offset at of text, the start of an element
// of the list of nodes, to the end of the list, and returns the offset
// after its closing bracket.
func (d *requestDecoder) elements(text string, at int) (int, error) {
	d.r = strictjson.NewReaderAt(text, at, 1)
	list := d.nodeBuf[:0]
	end, err := d.r.Elements(func(i int) error {
		list = append(list, Node{})
		return d.node(&list[i])
	})
	if cap(list) > cap(d.nodeBuf) {
		d.nodeBuf = list[:0]
	}
	d.nodesUsed = len(list)
	return end, err
}

func (d *requestDecoder) node(n *Node) error {
	r := d.r
	return r.Object(nodeFields, func(i int) error {
		switch i {
		case 0:
			s, err := r.String()
			n.Name = s
			return err
		case 1:
			s, err := r.String()
			n.UID = types.UID(s)
			return err
		case 2:
			s, err := r.String()
			n.Pool = s
			return err
		case 3:
			return d.allocatable(&n.AllocatableGPUs)
		default:
			if null, err := r.Null(); null || err != nil {
				n.State = nil
				return err
			}
			n.State = d.states.next()
			return d.state(n.State)
		}
	})
}

// allocatable decodes an optional count into the shared block of counts;
// null leaves it unknown.
func (d *requestDecoder) allocatable(count **int64) error {
	r := d.r
	if null, err := r.Null(); null || err != nil {
		*count = nil
		return err
	}
	*count = d.counts.next()
	v, err := r.Int64()
	**count = v
	return err
}

func (d *requestDecoder) state(s *v1alpha1.NodeSecurityStateSpec) error {
	r := d.r
	return r.Object(stateFields, func(i int) error {
		switch i {
		case 0:
			v, err := r.String()
			s.NodeUID = types.UID(v)
			return err
		case 1:
			v, err := r.String()
			s.Incarnation = v
			return err
		case 2:
			return r.Time(&s.ObservedAt)
		case 3:
			v, err := r.String()
			s.Source = v1alpha1.EvidenceSource(v)
			return err
		case 4:
			b, err := r.Bool()
			s.Complete = b
			return err
		case 5:
			return d.deviceList(&s.Devices)
		default:
			if null, err := r.Null(); null || err != nil {
				s.TEE = nil
				return err
			}
			s.TEE = d.tees.next()
			return d.tee(s.TEE)
		}
	})
}

// deviceList decodes a node's devices into the shared block of devices.
func (d *requestDecoder) deviceList(list *[]v1alpha1.GPUDevice) error {
	return readList(d.r, &d.devices, list, d.device)
}

func (d *requestDecoder) device(g *v1alpha1.GPUDevice) error {
	r := d.r
	return r.Object(deviceFields, func(i int) error {
		if i == 3 {
			b, err := r.Bool()
			g.MIG = b
			return err
		}
		s, err := r.String()
		switch i {
		case 0:
			g.ID = s
		case 1:
			g.Vendor = s
		case 2:
			g.Model = s
		case 4:
			g.SharingMode = v1alpha1.GPUSharingMode(s)
		case 5:
			g.MIGProfile = s
		default:
			g.CCMode = v1alpha1.GPUCCMode(s)
		}
		return err
	})
}

func (d *requestDecoder) tee(t *v1alpha1.TEEFacts) error {
	r := d.r
	return r.Object(teeFields, func(i int) error {
		switch i {
		case 0:
			s, err := r.String()
			t.Type = v1alpha1.TEEType(s)
			return err
		case 1:
			s, err := r.String()
			t.Measurement = v1alpha1.Measurement(s)
			return err
		default:
			if null, err := r.Null(); null || err != nil {
				t.Attestation = nil
				return err
			}
			t.Attestation = d.attestations.next()
			return d.attestation(t.Attestation)
		}
	})
}

func (d *requestDecoder) attestation(a *v1alpha1.Attestation) error {
	r := d.r
	return r.Object(attestationFields, func(i int) error {
		switch i {
		case 0:
			s, err := r.String()
			a.Verdict = v1alpha1.AttestationVerdict(s)
			return err
		case 1:
			return r.Time(&a.VerifiedAt)
		default:
			s, err := r.String()
			a.Verifier = s
			return err
		}
	})
}

// readStrings decodes a list of strings: null is a nil list, [] an empty
// one.
func readStrings[T ~string](r *strictjson.Reader, list *[]T) error {
	*list = nil
	present, err := r.Array(func(int) error {
		s, err := r.String()
		*list = append(*list, T(s))
		return err
	})
	if present && *list == nil {
		*list = []T{}
	}
	return err
}

// readDuration decodes an optional duration.
func readDuration(r *strictjson.Reader, dur **metav1.Duration) error {
	if null, err := r.Null(); null || err != nil {
		*dur = nil
		return err
	}
	*dur = new(metav1.Duration)
	return r.Duration(*dur)
}

// readList decodes an array into the unused tail of blk, so that the lists
// of all nodes share a few allocations; a list that outgrows the block
// moves to a new one twice as large, which is the one a reused decoder
// keeps. Null is a nil list, [] an empty one, and the
// list's capacity ends with it, so that appending to it cannot overwrite
// the next list.
func readList[T any](r *strictjson.Reader, blk *[]T, list *[]T, elem func(*T) error) error {
	start := len(*blk)
	present, err := r.Array(func(int) error {
		b := *blk
		if len(b) == cap(b) {
			n := len(b) - start
			grown := make([]T, n, max(2*cap(b), 2*n, 8))
			copy(grown, b[start:])
			b, start = grown, 0
		}
		b = b[:len(b)+1]
		*blk = b
		return elem(&b[len(b)-1])
	})
	end := len(*blk)
	switch {
	case !present:
		*list = nil
	case end == start:
		*list = []T{}
	default:
		*list = (*blk)[start:end:end]
	}
	return err
}

// block hands out zeroed values of T from chunks that double in size up
// to maxBlock values, instead of one allocation per value. reset makes
// every value handed out since the last reset zero again and available.
type block[T any] struct {
	chunks [][]T
	chunk  int // the chunk values are handed out from
	used   int // values handed out from it
}

const maxBlock = 1024

func (b *block[T]) next() *T {
	for b.chunk < len(b.chunks) && b.used == len(b.chunks[b.chunk]) {
		b.chunk++
		b.used = 0
	}
	if b.chunk == len(b.chunks) {
		size := 4
		if n := len(b.chunks); n > 0 {
			size = min(2*len(b.chunks[n-1]), maxBlock)
		}
		b.chunks = append(b.chunks, make([]T, size))
	}
	v := &b.chunks[b.chunk][b.used]
	b.used++
	return v
}

func (b *block[T]) reset() {
	for i := 0; i < b.chunk && i < len(b.chunks); i++ {
		clear(b.chunks[i])
	}
	if b.chunk < len(b.chunks) {
		clear(b.chunks[b.chunk][:b.used])
	}
	b.chunk, b.used = 0, 0
}
