package strictjson

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// maxDepth bounds nesting, so that a hostile document cannot exhaust the
// stack of the recursive decoder.
const maxDepth = 64

// ErrUnsupportedType is returned for Go types this decoder does not handle;
// it marks a programming error, never a bad document.
var ErrUnsupportedType = errors.New("strictjson: unsupported type")

// Error is a problem with the document at one place in it.
type Error struct {
	// Path is where the problem is, e.g. nodes[3].state.observedAt; empty
	// for the document as a whole.
	Path string
	// Offset is the byte offset in the document where decoding stopped.
	Offset int
	// Msg says what is wrong.
	Msg string
}

// Error renders the path and the message, as in
// "nodes[3].state.observedAt: expected a string, found a number".
func (e *Error) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%s (at byte %d)", e.Msg, e.Offset)
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Msg)
}

// Option relaxes the decoder.
type Option func(*options)

type options struct {
	ignoreUnknown bool
}

// IgnoreUnknownFields skips object members that the struct does not have,
// for clients that must read answers from newer servers. Everything else
// stays strict.
func IgnoreUnknownFields() Option { return func(o *options) { o.ignoreUnknown = true } }

// Unmarshal decodes the JSON document data into v, which must be a non-nil
// pointer. On failure it returns an *Error, and v may be partly filled.
func Unmarshal(data []byte, v any, opts ...Option) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("%w: Unmarshal needs a non-nil pointer, not %T", ErrUnsupportedType, v)
	}
	decode, err := codecFor(rv.Type().Elem())
	if err != nil {
		return err
	}
	// One copy of the document, that decoded strings are cut from.
	d := &decoder{data: string(data)}
	for _, o := range opts {
		o(&d.opts)
	}
	d.skipSpace()
	if d.pos == len(d.data) {
		return d.errorf("the document is empty")
	}
	if err := decode(d, rv.Elem()); err != nil {
		return err
	}
	d.skipSpace()
	if d.pos != len(d.data) {
		return d.errorf("unexpected data after the top-level value")
	}
	return nil
}

func unsupported(t reflect.Type) error { return fmt.Errorf("%w: %s", ErrUnsupportedType, t) }

// decoder walks one document; path holds where it is, for error messages.
type decoder struct {
	data string
	pos  int
	path []step
	opts options
}

// step is one element of a path: a field name, or an index when name is "".
type step struct {
	name  string
	index int
}

func (d *decoder) pathString() string {
	var b strings.Builder
	for _, s := range d.path {
		if s.name == "" {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.name)
	}
	return b.String()
}

func (d *decoder) errorf(format string, args ...any) *Error {
	return &Error{Path: d.pathString(), Offset: d.pos, Msg: fmt.Sprintf(format, args...)}
}

func (d *decoder) push(s step) error {
	if len(d.path) >= maxDepth {
		return d.errorf("the document nests deeper than %d levels", maxDepth)
	}
	d.path = append(d.path, s)
	return nil
}

func (d *decoder) pop() { d.path = d.path[:len(d.path)-1] }
