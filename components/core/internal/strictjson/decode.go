package strictjson

import (
	"reflect"
	"strconv"
)

// errNull refuses null where the Go value cannot be nil.
func (d *decoder) errNull(want string) error {
	if d.hasPrefix("null") {
		return d.errorf("null is not allowed here")
	}
	return d.errorf("expected %s, found %s", want, d.found())
}

func pointerCodec(t reflect.Type, building map[reflect.Type]*decodeFunc) (decodeFunc, error) {
	elem, err := build(t.Elem(), building)
	if err != nil {
		return nil, err
	}
	elemType := t.Elem()
	return func(d *decoder, v reflect.Value) error {
		if d.peek() == 'n' {
			v.SetZero()
			return d.literal("null")
		}
		if v.IsNil() {
			v.Set(reflect.New(elemType))
		}
		return elem(d, v.Elem())
	}, nil
}

func structCodec(t reflect.Type, building map[reflect.Type]*decodeFunc) (decodeFunc, error) {
	si, err := structOf(t, building)
	if err != nil {
		return nil, err
	}
	return func(d *decoder, v reflect.Value) error {
		return d.object(&si.Fields, func(i int) error {
			f := &si.fields[i]
			return f.decode(d, v.Field(f.index))
		})
	}, nil
}

// object decodes an object whose members are fields: member decodes the
// value of fields' i-th name. Each field may appear once.
func (d *decoder) object(fields *Fields, member func(i int) error) error {
	if d.peek() != '{' {
		return d.errNull("an object")
	}
	d.pos++
	if d.peek() == '}' {
		d.pos++
		return nil
	}
	var seen uint64
	expect := 0 // members usually come in the order of the struct
	for {
		key, err := d.key()
		if err != nil {
			return err
		}
		i := expect
		if i >= len(fields.names) || fields.names[i] != key {
			i = fields.index(key)
		}
		expect = i + 1
		if i < 0 {
			if err := d.unknownField(key, fields); err != nil {
				return err
			}
		} else {
			if err := d.push(step{name: fields.names[i]}); err != nil {
				return err
			}
			if seen&(1<<i) != 0 {
				return d.errorf("duplicate field")
			}
			seen |= 1 << i
			if err := d.colon(); err != nil {
				return err
			}
			if err := member(i); err != nil {
				return err
			}
			d.pop()
		}
		if done, err := d.next('}', "a field"); done || err != nil {
			return err
		}
	}
}

// unknownField refuses a field the struct does not have, or skips its value
// when the caller asked for leniency.
func (d *decoder) unknownField(key string, fields *Fields) error {
	if err := d.push(step{name: key}); err != nil {
		return err
	}
	if !d.opts.ignoreUnknown {
		return d.errorf("unknown field (expected one of: %s)", fields.list)
	}
	if err := d.colon(); err != nil {
		return err
	}
	if err := d.skipValue(); err != nil {
		return err
	}
	d.pop()
	return nil
}

func (d *decoder) colon() error {
	if d.peek() != ':' {
		return d.errorf("expected ':' after the field name, found %s", d.found())
	}
	d.pos++
	return nil
}

// next consumes the ',' between members or elements, or the closing
// bracket, which it reports as done.
func (d *decoder) next(closing byte, what string) (bool, error) {
	switch d.peek() {
	case ',':
		d.pos++
		return false, nil
	case closing:
		d.pos++
		return true, nil
	}
	return false, d.errorf("expected ',' or '%c' after %s, found %s", closing, what, d.found())
}

func mapCodec(t reflect.Type, building map[reflect.Type]*decodeFunc) (decodeFunc, error) {
	if t.Key().Kind() != reflect.String {
		return nil, unsupported(t)
	}
	elem, err := build(t.Elem(), building)
	if err != nil {
		return nil, err
	}
	return func(d *decoder, v reflect.Value) error {
		switch d.peek() {
		case 'n':
			v.SetZero()
			return d.literal("null")
		case '{':
		default:
			return d.errorf("expected an object, found %s", d.found())
		}
		d.pos++
		v.Set(reflect.MakeMap(t))
		if d.peek() == '}' {
			d.pos++
			return nil
		}
		for {
			raw, err := d.key()
			if err != nil {
				return err
			}
			key := string(raw)
			if err := d.push(step{name: key}); err != nil {
				return err
			}
			k := reflect.ValueOf(key).Convert(t.Key())
			if v.MapIndex(k).IsValid() {
				return d.errorf("duplicate key")
			}
			if err := d.colon(); err != nil {
				return err
			}
			e := reflect.New(t.Elem()).Elem()
			if err := elem(d, e); err != nil {
				return err
			}
			v.SetMapIndex(k, e)
			d.pop()
			if done, err := d.next('}', "a field"); done || err != nil {
				return err
			}
		}
	}, nil
}

func sliceCodec(t reflect.Type, building map[reflect.Type]*decodeFunc) (decodeFunc, error) {
	elem, err := build(t.Elem(), building)
	if err != nil {
		return nil, err
	}
	return func(d *decoder, v reflect.Value) error {
		switch d.peek() {
		case 'n':
			v.SetZero()
			return d.literal("null")
		case '[':
		default:
			return d.errorf("expected an array, found %s", d.found())
		}
		d.pos++
		v.Set(reflect.MakeSlice(t, 0, 0))
		if d.peek() == ']' {
			d.pos++
			return nil
		}
		for n := 0; ; n++ {
			if err := d.push(step{index: n}); err != nil {
				return err
			}
			if n == v.Cap() {
				v.Grow(max(n, 4))
			}
			v.SetLen(n + 1)
			if err := elem(d, v.Index(n)); err != nil {
				return err
			}
			d.pop()
			if done, err := d.next(']', "an element"); done || err != nil {
				return err
			}
		}
	}, nil
}

func decodeString(d *decoder, v reflect.Value) error {
	if d.peek() != '"' {
		return d.errNull("a string")
	}
	s, err := d.str()
	if err != nil {
		return err
	}
	v.SetString(s)
	return nil
}

func decodeBool(d *decoder, v reflect.Value) error {
	switch {
	case d.peek() == 't':
		v.SetBool(true)
		return d.literal("true")
	case d.peek() == 'f':
		v.SetBool(false)
		return d.literal("false")
	}
	return d.errNull("a boolean")
}

func decodeNumber(d *decoder, v reflect.Value) error {
	text, integer, err := d.numberText()
	if err != nil {
		return err
	}
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(text, v.Type().Bits())
		if err != nil {
			return d.errorf("number %s does not fit a %s", text, v.Type())
		}
		v.SetFloat(f)
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if !integer {
			return d.errorf("expected an integer, found %s", text)
		}
		u, err := strconv.ParseUint(text, 10, v.Type().Bits())
		if err != nil {
			return d.errorf("integer %s does not fit a %s", text, v.Type())
		}
		v.SetUint(u)
		return nil
	}
	i, err := d.signed(text, integer, v.Type())
	if err != nil {
		return err
	}
	v.SetInt(i)
	return nil
}

// numberText reads a number and reports whether it is written as an
// integer; any other value is refused, null included.
func (d *decoder) numberText() (string, bool, error) {
	if c := d.peek(); c != '-' && (c < '0' || c > '9') {
		return "", false, d.errNull("a number")
	}
	return d.number()
}

// signed parses the text of a number for a signed integer type t.
func (d *decoder) signed(text string, integer bool, t reflect.Type) (int64, error) {
	if !integer {
		return 0, d.errorf("expected an integer, found %s", text)
	}
	i, err := strconv.ParseInt(text, 10, t.Bits())
	if err != nil {
		return 0, d.errorf("integer %s does not fit a %s", text, t)
	}
	return i, nil
}
