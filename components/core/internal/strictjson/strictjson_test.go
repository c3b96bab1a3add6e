package strictjson

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type mode string

type inner struct {
	Mode  mode             `json:"mode,omitempty"`
	At    metav1.Time      `json:"at"`
	Every *metav1.Duration `json:"every,omitempty"`
	Ok    bool             `json:"ok"`
}

type doc struct {
	Name   string            `json:"name"`
	Count  int32             `json:"count,omitempty"`
	Total  *int64            `json:"total,omitempty"`
	Ratio  float64           `json:"ratio,omitempty"`
	Size   uint8             `json:"size,omitempty"`
	Tags   []string          `json:"tags,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	Inner  *inner            `json:"inner,omitempty"`
	Items  []inner           `json:"items,omitempty"`
	Raw    rawText           `json:"raw,omitempty"`
	Hidden string            `json:"-"`
	Plain  string
	//lint:ignore U1000 present to check that unexported fields are never decoded
	secret string
}

// rawText checks that other json.Unmarshaler types get the raw value.
type rawText struct{ text string }

func (r *rawText) UnmarshalJSON(b []byte) error {
	if string(b) == `"bad"` {
		return errors.New("bad raw value")
	}
	r.text = string(b)
	return nil
}

func TestUnmarshalAccepts(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Local()
	cases := []struct {
		name string
		in   string
		want doc
	}{
		{name: "empty object", in: `{}`, want: doc{}},
		{name: "whitespace around", in: " \n\t{ \"name\" : \"a\" } \r\n", want: doc{Name: "a"}},
		{
			name: "every kind",
			in: `{"name":"n","count":-7,"ratio":0.5e1,"size":255,"tags":["x","y"],"labels":{"k":"v"},` +
				`"inner":{"mode":"M","at":"2026-03-01T12:00:00Z","every":"1m30s","ok":true},` +
				`"items":[{"at":null,"ok":false}],"raw":[1,{"a":[]}],"Plain":"p"}`,
			want: doc{Name: "n", Count: -7, Ratio: 5, Size: 255, Tags: []string{"x", "y"},
				Labels: map[string]string{"k": "v"},
				Inner:  &inner{Mode: "M", At: metav1.NewTime(at), Every: &metav1.Duration{Duration: 90 * time.Second}, Ok: true},
				Items:  []inner{{}}, Raw: rawText{`[1,{"a":[]}]`}, Plain: "p"},
		},
		{name: "escapes", in: `{"name":"a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"}`, want: doc{Name: "a\"\\/\b\f\n\r\té😀"}},
		{name: "raw UTF-8", in: `{"name":"héllo"}`, want: doc{Name: "héllo"}},
		{name: "null pointer, slice and map", in: `{"inner":null,"tags":null,"labels":null,"total":null}`, want: doc{}},
		{name: "pointer to an integer", in: `{"total":-9223372036854775808}`, want: doc{Total: ptr(int64(math.MinInt64))}},
		{name: "empty array", in: `{"tags":[]}`, want: doc{Tags: []string{}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got doc
			if err := Unmarshal([]byte(tc.in), &got); err != nil {
				t.Fatalf("Unmarshal() error = %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(doc{}, rawText{})); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnmarshalRefuses(t *testing.T) {
	cases := []struct {
		name     string
		in       string
		wantPath string
		wantMsg  string
	}{
		{"empty document", ``, "", "the document is empty"},
		{"only spaces", "  \n", "", "the document is empty"},
		{"trailing data", `{} {}`, "", "unexpected data after the top-level value"},
		{"trailing garbage", `{}x`, "", "unexpected data after the top-level value"},
		{"not an object", `[]`, "", "expected an object, found an array"},
		{"null document", `null`, "", "null is not allowed here"},
		{"unknown field", `{"name":"a","nmae":"b"}`, "nmae", "unknown field (expected one of: name, count,"},
		{"field case differs", `{"Name":"a"}`, "Name", "unknown field"},
		{"hidden field", `{"Hidden":"a"}`, "Hidden", "unknown field"},
		{"unexported field", `{"secret":"a"}`, "secret", "unknown field"},
		{"duplicate field", `{"name":"a","name":"b"}`, "name", "duplicate field"},
		{"duplicate map key", `{"labels":{"k":"a","k":"b"}}`, "labels.k", "duplicate key"},
		{"string for number", `{"count":"1"}`, "count", "expected a number, found a string"},
		{"fraction for integer", `{"count":1.5}`, "count", "expected an integer, found 1.5"},
		{"exponent for integer", `{"count":1e3}`, "count", "expected an integer, found 1e3"},
		{"integer overflow", `{"count":2147483648}`, "count", "integer 2147483648 does not fit a int32"},
		{"int64 overflow", `{"total":9223372036854775808}`, "total", "integer 9223372036854775808 does not fit a int64"},
		{"fraction for a pointer to an integer", `{"total":0.0}`, "total", "expected an integer, found 0.0"},
		{"negative unsigned", `{"size":-1}`, "size", "does not fit a uint8"},
		{"leading zero", `{"count":01}`, "count", "invalid number"},
		{"bare minus", `{"count":-}`, "count", "invalid number"},
		{"number for string", `{"name":1}`, "name", "expected a string, found a number"},
		{"null for string", `{"name":null}`, "name", "null is not allowed here"},
		{"bad boolean", `{"inner":{"ok":tru}}`, "inner.ok", "invalid literal, expected true"},
		{"array index in path", `{"items":[{},{"ok":1}]}`, "items[1].ok", "expected a boolean, found a number"},
		{"bad timestamp", `{"items":[{"at":"yesterday"}]}`, "items[0].at", `invalid RFC 3339 timestamp "yesterday"`},
		{"empty timestamp", `{"inner":{"at":""}}`, "inner.at", `invalid RFC 3339 timestamp ""`},
		{"bad duration", `{"inner":{"every":"soon"}}`, "inner.every", `invalid duration "soon"`},
		{"custom unmarshaler error", `{"raw":"bad"}`, "raw", "bad raw value"},
		{"custom unmarshaler malformed", `{"raw":[1,}`, "raw", "expected a value, found '}'"},
		{"invalid UTF-8", "{\"name\":\"\xff\"}", "name", "invalid UTF-8 in string"},
		{"control character", "{\"name\":\"a\nb\"}", "name", "control character 0x0a in string"},
		{"lone surrogate", `{"name":"\ud83d"}`, "name", "lone UTF-16 surrogate in string"},
		{"bad escape", `{"name":"\x"}`, "name", `invalid escape \x in string`},
		{"short unicode escape", `{"name":"\u12"}`, "name", `invalid \u escape in string`},
		{"unterminated string", `{"name":"abc`, "name", "unterminated string"},
		{"missing colon", `{"name" "a"}`, "name", "expected ':' after the field name, found a string"},
		{"missing comma", `{"name":"a" "count":1}`, "", "expected ',' or '}' after a field, found a string"},
		{"trailing comma", `{"name":"a",}`, "", "expected a string, found '}'"},
		{"unterminated array", `{"tags":["a"`, "tags", "expected ',' or ']' after an element, found the end of the document"},
		{"unquoted key", `{name:"a"}`, "", "expected a string, found 'n'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got doc
			err := Unmarshal([]byte(tc.in), &got)
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("Unmarshal() error = %v, want an *Error", err)
			}
			if se.Path != tc.wantPath || !strings.Contains(se.Msg, tc.wantMsg) {
				t.Errorf("got path %q msg %q, want path %q msg containing %q", se.Path, se.Msg, tc.wantPath, tc.wantMsg)
			}
		})
	}
}

func TestErrorRendering(t *testing.T) {
	var got doc
	err := Unmarshal([]byte(`{"items":[{"at":"x"}]}`), &got)
	if want := `items[0].at: invalid RFC 3339 timestamp "x"`; err == nil || err.Error() != want {
		t.Errorf("Error() = %v, want %q", err, want)
	}
	err = Unmarshal([]byte(`{}  x`), &got)
	if want := "unexpected data after the top-level value (at byte 4)"; err == nil || err.Error() != want {
		t.Errorf("Error() = %v, want %q", err, want)
	}
}

func TestDepthLimit(t *testing.T) {
	deep := strings.Repeat(`{"raw":`, 1) + strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1) + "}"
	var got doc
	if err := Unmarshal([]byte(deep), &got); err == nil || !strings.Contains(err.Error(), "nests deeper") {
		t.Errorf("Unmarshal() error = %v, want a depth error", err)
	}
}

func TestUnsupportedTypes(t *testing.T) {
	type embedded struct{ metav1.TypeMeta }
	cases := []struct {
		name string
		v    any
	}{
		{"not a pointer", doc{}},
		{"nil pointer", (*doc)(nil)},
		{"embedded struct", &embedded{}},
		{"interface", new(any)},
		{"time.Time", new(time.Time)},
		{"int-keyed map", new(map[int]string)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Unmarshal([]byte(`{"a":"b"}`), tc.v)
			if !errors.Is(err, ErrUnsupportedType) {
				t.Errorf("Unmarshal() error = %v, want ErrUnsupportedType", err)
			}
		})
	}
}

func TestIgnoreUnknownFields(t *testing.T) {
	in := `{"name":"a","future":{"deep":[1,{"x":null}]},"inner":{"ok":true,"later":"x"}}`
	var got doc
	if err := Unmarshal([]byte(in), &got, IgnoreUnknownFields()); err != nil {
		t.Fatalf("Unmarshal() error = %v", err)
	}
	if want := (doc{Name: "a", Inner: &inner{Ok: true}}); !cmp.Equal(want, got, cmp.AllowUnexported(doc{}, rawText{})) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	// Leniency covers unknown fields only.
	for _, bad := range []string{`{"name":"a","name":"b"}`, `{"future":[1,}`, `{"name":1}`} {
		if err := Unmarshal([]byte(bad), &got, IgnoreUnknownFields()); err == nil {
			t.Errorf("Unmarshal(%s) succeeded", bad)
		}
	}
}

type tree struct {
	Name string `json:"name"`
	Kids []tree `json:"kids,omitempty"`
	Next *tree  `json:"next,omitempty"`
}

func TestRecursiveTypes(t *testing.T) {
	var got tree
	in := `{"name":"a","kids":[{"name":"b","kids":[{"name":"c"}]}],"next":{"name":"d","next":{"name":"e"}}}`
	if err := Unmarshal([]byte(in), &got); err != nil {
		t.Fatal(err)
	}
	want := tree{Name: "a", Kids: []tree{{Name: "b", Kids: []tree{{Name: "c"}}}}, Next: &tree{Name: "d", Next: &tree{Name: "e"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	err := Unmarshal([]byte(`{"kids":[{"kids":[{"nmae":"x"}]}]}`), &got)
	if err == nil || err.Error() != `kids[0].kids[0].nmae: unknown field (expected one of: name, kids, next)` {
		t.Errorf("error = %v", err)
	}
}

// TestStringsAreCutFromTheDocument checks the substrings around
// whitespace and escapes, the two ways their offsets could slip.
func TestStringsAreCutFromTheDocument(t *testing.T) {
	var got doc
	in := " {  \"name\"  :\n \"abc\" , \"tags\" : [ \"x\\ny\" ,\t\"zz\" ], \"labels\":{ \"k\" :  \"v\\u00e9w\" } } "
	if err := Unmarshal([]byte(in), &got); err != nil {
		t.Fatal(err)
	}
	want := doc{Name: "abc", Tags: []string{"x\ny", "zz"}, Labels: map[string]string{"k": "véw"}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(doc{}, rawText{})); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func ptr[T any](v T) *T { return &v }

// TestReaderInt64 checks that Reader.Int64 reads and refuses what
// Unmarshal does for an int64 field, with the same errors.
func TestReaderInt64(t *testing.T) {
	type one struct {
		N int64 `json:"n"`
	}
	fields := NewFields("n")
	for _, v := range []string{
		`0`, `-1`, `42`, `9223372036854775807`, `-9223372036854775808`, `9223372036854775808`,
		`1.0`, `1e2`, `-0`, `01`, `-`, `"1"`, `null`, `true`, `[]`, `{}`, ``,
	} {
		t.Run(v, func(t *testing.T) {
			text := `{"n":` + v + `}`
			var want one
			wantErr := Unmarshal([]byte(text), &want)
			var got one
			r := NewReader(text)
			err := r.Object(fields, func(int) error {
				n, err := r.Int64()
				got.N = n
				return err
			})
			if wantErr != nil || err != nil {
				var we, ge *Error
				if !errors.As(wantErr, &we) || !errors.As(err, &ge) || *we != *ge {
					t.Fatalf("Reader error %v, Unmarshal error %v", err, wantErr)
				}
				return
			}
			if got != want {
				t.Errorf("Reader read %d, Unmarshal %d", got.N, want.N)
			}
		})
	}
}
