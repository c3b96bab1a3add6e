package strictjson

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzUnmarshal checks that the decoder never panics and that whatever it
// accepts, encoding/json accepts too and decodes to the same value: being
// strict must only ever mean refusing more.
func FuzzUnmarshal(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"name":"a","count":3,"tags":["x"],"labels":{"k":"v"}}`,
		`{"inner":{"mode":"M","at":"2026-03-01T12:00:00Z","every":"1m","ok":true}}`,
		`{"items":[{"at":null},{"ok":false}],"ratio":-1.5e-3,"size":7}`,
		`{"total":-9223372036854775808}`, `{"total":null}`, `{"total":1e0}`,
		`{"name":"\u00e9\ud83d\ude00\n"}`, `{"raw":[1,{"a":[]}]}`, `[`, `{"name":"a",}`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var strict doc
		if err := Unmarshal(data, &strict); err != nil {
			return
		}
		var std doc
		if err := json.Unmarshal(data, &std); err != nil {
			t.Fatalf("strictjson accepted %q but encoding/json refused it: %v", data, err)
		}
		if diff := cmp.Diff(std, strict, cmp.AllowUnexported(doc{}, rawText{})); diff != "" {
			t.Fatalf("decoders disagree on %q (-encoding/json +strictjson):\n%s", data, diff)
		}
	})
}
