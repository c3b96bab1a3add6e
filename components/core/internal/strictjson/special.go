package strictjson

import (
	"encoding/json"
	"reflect"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// decodeMetav1Time decodes an RFC 3339 timestamp exactly as metav1.Time
// does: null is the zero time, and the result is in the local time zone.
func decodeMetav1Time(d *decoder, v reflect.Value) error {
	return d.metav1Time(v.Addr().Interface().(*metav1.Time))
}

func (d *decoder) metav1Time(t *metav1.Time) error {
	if d.peek() == 'n' {
		*t = metav1.Time{}
		return d.literal("null")
	}
	if d.peek() != '"' {
		return d.errorf("expected a string, found %s", d.found())
	}
	start := d.pos
	s, err := d.str()
	if err != nil {
		return err
	}
	parsed, err := time.Parse(time.RFC3339, s)
	if err != nil {
		d.pos = start
		return d.errorf("invalid RFC 3339 timestamp %q", s)
	}
	t.Time = parsed.Local()
	return nil
}

// decodeMetav1Duration decodes a Go duration string, as metav1.Duration
// does.
func decodeMetav1Duration(d *decoder, v reflect.Value) error {
	return d.metav1Duration(v.Addr().Interface().(*metav1.Duration))
}

func (d *decoder) metav1Duration(dur *metav1.Duration) error {
	if d.peek() != '"' {
		return d.errNull("a string")
	}
	start := d.pos
	s, err := d.str()
	if err != nil {
		return err
	}
	parsed, err := time.ParseDuration(s)
	if err != nil {
		d.pos = start
		return d.errorf("invalid duration %q: %s", s, strings.TrimPrefix(err.Error(), "time: "))
	}
	dur.Duration = parsed
	return nil
}

// decodeUnmarshaler hands the raw value to a type's own UnmarshalJSON.
func decodeUnmarshaler(d *decoder, v reflect.Value) error {
	// The value starts at its first byte, not at the space before it.
	d.skipSpace()
	start := d.pos
	if err := d.skipValue(); err != nil {
		return err
	}
	if err := v.Addr().Interface().(json.Unmarshaler).UnmarshalJSON([]byte(d.data[start:d.pos])); err != nil {
		d.pos = start
		return d.errorf("%s", err)
	}
	return nil
}
