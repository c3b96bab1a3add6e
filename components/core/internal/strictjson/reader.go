package strictjson

import (
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var int64Type = reflect.TypeFor[int64]()

// Fields are the members an object may have: the JSON names of a struct's
// fields, in the order of the struct.
type Fields struct {
	names []string
	// list joins the names for the "unknown field" message.
	list string
}

// NewFields returns the fields of an object with these member names, in
// the order of the struct's fields. An object has at most 64 fields.
func NewFields(names ...string) *Fields {
	if len(names) > 64 {
		panic("strictjson: more than 64 fields")
	}
	return &Fields{names: names, list: strings.Join(names, ", ")}
}

// index returns the position of key among the names, or -1.
func (f *Fields) index(key string) int {
	for i, name := range f.names {
		if name == key {
			return i
		}
	}
	return -1
}

// Reader walks a document for a decoder written by hand for one type. Its
// methods apply the checks of Unmarshal and report errors with the same
// paths and messages, so that a hand-written decoder that calls them the way
// Unmarshal walks the type is indistinguishable from Unmarshal, only
// without reflection. Strings are cut from the document, as with Unmarshal.
type Reader struct {
	d decoder
}

// NewReader returns a Reader at the start of the document text.
func NewReader(text string, opts ...Option) *Reader {
	r := &Reader{d: decoder{data: text, path: make([]step, 0, 8)}}
	for _, o := range opts {
		o(&r.d.opts)
	}
	return r
}

// Begin refuses an empty document; call it before reading the top-level
// value.
func (r *Reader) Begin() error {
	r.d.skipSpace()
	if r.d.pos == len(r.d.data) {
		return r.d.errorf("the document is empty")
	}
	return nil
}

// End refuses anything but space after the top-level value.
func (r *Reader) End() error {
	r.d.skipSpace()
	if r.d.pos != len(r.d.data) {
		return r.d.errorf("unexpected data after the top-level value")
	}
	return nil
}

// Object reads an object whose members are fields: for each member,
// member reads the value of the field at index i of fields, with the
// field's name on the path. Unknown and repeated members are refused, as
// is null: a pointer field calls Null first.
func (r *Reader) Object(fields *Fields, member func(i int) error) error {
	return r.d.object(fields, member)
}

// Array reads an array, calling elem for the element at index i with the
// index on the path. It returns false for null, which Unmarshal decodes as
// a nil slice; an empty array is an empty, non-nil slice.
func (r *Reader) Array(elem func(i int) error) (bool, error) {
	return r.ArrayHandOff(-1, elem, nil)
}

// ArrayHandOff is Array for an array whose later elements another Reader
// may have decoded meanwhile, from offset at on (see Elements). Elements
// before at are read with elem. When an element starts exactly at at,
// handOff is called with its index: if it returns true, the other Reader
// has read that element, the rest and the closing bracket, and this
// Reader goes on at end. Otherwise, and whenever no element starts at at,
// this Reader reads the rest itself, so that the outcome is always what
// Array would have read.
func (r *Reader) ArrayHandOff(at int, elem func(i int) error, handOff func(i int) (end int, ok bool)) (bool, error) {
	d := &r.d
	switch d.peek() {
	case 'n':
		return false, d.literal("null")
	case '[':
	default:
		return false, d.errorf("expected an array, found %s", d.found())
	}
	d.pos++
	if d.peek() == ']' {
		d.pos++
		return true, nil
	}
	for n := 0; ; n++ {
		if d.pos == at {
			if end, ok := handOff(n); ok {
				d.pos = end
				return true, nil
			}
		}
		if err := d.push(step{index: n}); err != nil {
			return true, err
		}
		if err := elem(n); err != nil {
			return true, err
		}
		d.pop()
		if done, err := d.next(']', "an element"); done || err != nil {
			return true, err
		}
	}
}

// NewReaderAt returns a Reader at offset at of text, for Elements: at is
// where an element of an array starts, depth how deeply that array is
// nested, so that the nesting limit applies as it would to a Reader that
// had come from the start. Errors name paths relative to the array.
func NewReaderAt(text string, at, depth int, opts ...Option) *Reader {
	r := NewReader(text, opts...)
	r.d.pos = at
	for range depth {
		r.d.path = append(r.d.path, step{name: "-"})
	}
	return r
}

// Elements reads the elements of an array from the Reader's position,
// which is the start of one, calling elem with 0 for the first read, up
// to and including the closing bracket, and returns the offset after it.
func (r *Reader) Elements(elem func(i int) error) (int, error) {
	d := &r.d
	for n := 0; ; n++ {
		if err := d.push(step{index: n}); err != nil {
			return 0, err
		}
		if err := elem(n); err != nil {
			return 0, err
		}
		d.pop()
		if done, err := d.next(']', "an element"); done || err != nil {
			return d.pos, err
		}
	}
}

// Pos returns the Reader's offset in the document.
func (r *Reader) Pos() int { return r.d.pos }

// Null consumes null and reports true when the next value is null, as a
// pointer, slice or map field allows; for any other value it consumes
// nothing.
func (r *Reader) Null() (bool, error) {
	if r.d.peek() != 'n' {
		return false, nil
	}
	return true, r.d.literal("null")
}

// String reads a string; null is refused.
func (r *Reader) String() (string, error) {
	if r.d.peek() != '"' {
		return "", r.d.errNull("a string")
	}
	return r.d.str()
}

// Bool reads true or false; null is refused.
func (r *Reader) Bool() (bool, error) {
	switch r.d.peek() {
	case 't':
		return true, r.d.literal("true")
	case 'f':
		return false, r.d.literal("false")
	}
	return false, r.d.errNull("a boolean")
}

// Int64 reads an integer as Unmarshal does for an int64: a number
// written without fraction or exponent that fits; null is refused, so a
// pointer field calls Null first.
func (r *Reader) Int64() (int64, error) {
	text, integer, err := r.d.numberText()
	if err != nil {
		return 0, err
	}
	return r.d.signed(text, integer, int64Type)
}

// Time reads a metav1.Time as Unmarshal does: an RFC 3339 timestamp, or
// null for the zero time.
func (r *Reader) Time(t *metav1.Time) error {
	return r.d.metav1Time(t)
}

// Duration reads a metav1.Duration as Unmarshal does: a Go duration
// string.
func (r *Reader) Duration(dur *metav1.Duration) error {
	return r.d.metav1Duration(dur)
}

// Names returns the member names, in order.
func (f *Fields) Names() []string { return f.names }
