package wire

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzDecodeEvaluateRequest checks that the decoder never panics, refuses
// only with a *RequestError, and that an accepted request survives a round
// trip through encoding/json unchanged: what the server judges is what the
// client meant.
func FuzzDecodeEvaluateRequest(f *testing.F) {
	full, _ := json.Marshal(fullRequest())
	f.Add(full)
	f.Add([]byte(`{"pod":{"namespace":"a"},"nodes":[]}`))
	f.Add([]byte(`{"pod":{"namespace":"a"},"tenant":{"id":"t"},"nodes":[{"name":"n","pool":"t"}]}`))
	f.Add([]byte(`{"pod":{"namespace":"a"},"nodes":[{"name":"n","state":{"observedAt":"x"}}]}`))
	f.Add([]byte(`{"pod":{"namespace":"a"},"nodes":[{"name":"n","allocatableGPUs":0},{"name":"m","allocatableGPUs":-2}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeEvaluateRequest(body, Limits{MaxNodes: 100})
		if err != nil {
			var re *RequestError
			if !errors.As(err, &re) || len(re.Errors) == 0 {
				t.Fatalf("refused %q without field errors: %v", body, err)
			}
			return
		}
		if errs := req.Validate(Limits{MaxNodes: 100}); len(errs) > 0 {
			t.Fatalf("accepted a request that does not validate: %v", errs)
		}
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("re-encoding: %v", err)
		}
		back, err := DecodeEvaluateRequest(again, Limits{MaxNodes: 100})
		if err != nil {
			t.Fatalf("re-encoded request %s refused: %v", again, err)
		}
		// metav1.Time encodes whole seconds only, and omitempty drops an
		// empty list, which means the same as an absent one.
		seconds := cmp.Comparer(func(a, b metav1.Time) bool { return a.Unix() == b.Unix() })
		if diff := cmp.Diff(req, back, seconds, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip changed the request (-first +second):\n%s", diff)
		}
	})
}
