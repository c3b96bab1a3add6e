package wire

import (
	"sync"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/core/internal/strictjson"
)

var (
	responseFields   = strictjson.NewFields("profile", "evaluatedAt", "pod", "results")
	verdictFields    = strictjson.NewFields("decision", "reasons", "message")
	nodeResultFields = strictjson.NewFields("node", "decision", "reasons", "message", "incarnation")
)

// DecodeEvaluateResponse decodes an answer as strictly as a request,
// except that members a newer evaluator may add are skipped: duplicate
// keys, null where a value is due and malformed JSON are still refused.
// The answer's strings share the memory of body. It decodes exactly what
// strictjson.Unmarshal with IgnoreUnknownFields does, which the
// differential fuzz test FuzzTypedDecoders checks, without reflection.
func DecodeEvaluateResponse(body string) (*EvaluateResponse, error) {
	return DecodeEvaluateResponseFor(body, 0)
}

// DecodeEvaluateResponseFor is DecodeEvaluateResponse for an answer
// expected to hold results for nodes nodes, which sizes the list of
// results in one allocation; an answer with any other number of results
// decodes all the same.
func DecodeEvaluateResponseFor(body string, nodes int) (*EvaluateResponse, error) {
	d := responseDecoder{expect: nodes}
	return d.decode(body)
}

func (d *responseDecoder) decode(body string) (*EvaluateResponse, error) {
	d.r, d.text = strictjson.NewReader(body, strictjson.IgnoreUnknownFields()), body
	var resp EvaluateResponse
	if err := d.r.Begin(); err != nil {
		return nil, err
	}
	if err := d.response(&resp); err != nil {
		return nil, err
	}
	if err := d.r.End(); err != nil {
		return nil, err
	}
	return &resp, nil
}

// responseDecoder reads one answer; the reasons of all results share a
// few allocations.
type responseDecoder struct {
	r       *strictjson.Reader
	reasons []guard.Reason
	// expect is how many results the caller expects.
	expect int
	// text is the answer being decoded.
	text string
	// handOffs counts the lists whose second half was decoded apart.
	handOffs int
}

func (d *responseDecoder) response(resp *EvaluateResponse) error {
	r := d.r
	return r.Object(responseFields, func(i int) error {
		switch i {
		case 0:
			s, err := r.String()
			resp.Profile = guard.Profile(s)
			return err
		case 1:
			return r.Time(&resp.EvaluatedAt)
		case 2:
			return d.verdict(&resp.Pod)
		default:
			resp.Results = nil
			if d.expect > 0 {
				resp.Results = make([]NodeResult, 0, d.expect)
			}
			present, err := d.results(&resp.Results)
			switch {
			case !present:
				resp.Results = nil
			case resp.Results == nil:
				resp.Results = []NodeResult{}
			}
			return err
		}
	})
}

// results decodes the list of results. As with a request's nodes, the
// second half of a long list is decoded on another CPU meanwhile, and used
// only if this decoder, reading in order, arrives exactly where it began
// and it decoded without error.
func (d *responseDecoder) results(list *[]NodeResult) (bool, error) {
	elem := func(i int) error {
		*list = append(*list, NodeResult{})
		return d.nodeResult(&(*list)[i])
	}
	at := splitList(d.text, d.r.Pos(), nodeResultFields)
	if at < 0 {
		return d.r.Array(elem)
	}
	tail := &responseDecoder{r: strictjson.NewReaderAt(d.text, at, 1, strictjson.IgnoreUnknownFields())}
	// The second half is copied into the list, so its own list is
	// recycled; it is cleared first, so as not to keep answers alive.
	tailList := tailResults.Get().(*[]NodeResult)
	defer func() {
		clear(*tailList)
		*tailList = (*tailList)[:0]
		tailResults.Put(tailList)
	}()
	return inHalves(d.r, at, elem,
		func() (int, error) {
			return tail.r.Elements(func(i int) error {
				*tailList = append(*tailList, NodeResult{})
				return tail.nodeResult(&(*tailList)[i])
			})
		},
		func() {
			*list = append(*list, *tailList...)
			d.handOffs++
		})
}

// tailResults are the lists the second halves of answers are decoded into.
var tailResults = sync.Pool{New: func() any { return new([]NodeResult) }}

func (d *responseDecoder) verdict(v *Verdict) error {
	r := d.r
	return r.Object(verdictFields, func(i int) error {
		switch i {
		case 0:
			s, err := r.String()
			v.Decision = guard.Decision(s)
			return err
		case 1:
			return readList(r, &d.reasons, &v.Reasons, d.reason)
		default:
			s, err := r.String()
			v.Message = s
			return err
		}
	})
}

func (d *responseDecoder) nodeResult(res *NodeResult) error {
	r := d.r
	return r.Object(nodeResultFields, func(i int) error {
		switch i {
		case 0:
			s, err := r.String()
			res.Node = s
			return err
		case 1:
			s, err := r.String()
			res.Decision = guard.Decision(s)
			return err
		case 2:
			return readList(r, &d.reasons, &res.Reasons, d.reason)
		case 3:
			s, err := r.String()
			res.Message = s
			return err
		default:
			s, err := r.String()
			res.Incarnation = s
			return err
		}
	})
}

func (d *responseDecoder) reason(reason *guard.Reason) error {
	s, err := d.r.String()
	*reason = guard.Reason(s)
	return err
}
