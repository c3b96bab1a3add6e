package strictjson

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	metav1TimeType     = reflect.TypeFor[metav1.Time]()
	metav1DurationType = reflect.TypeFor[metav1.Duration]()
	unmarshalerType    = reflect.TypeFor[json.Unmarshaler]()
	timeType           = reflect.TypeFor[time.Time]()
)

// decodeFunc decodes the next value of the document into v.
type decodeFunc func(d *decoder, v reflect.Value) error

// codecs caches one decodeFunc per type, so that reflection on a type
// happens once per process rather than once per value. Building happens
// under buildMu, and only finished functions are stored.
var (
	codecs  sync.Map // reflect.Type -> decodeFunc
	buildMu sync.Mutex
)

// codecFor returns the decodeFunc of t, building it on first use.
func codecFor(t reflect.Type) (decodeFunc, error) {
	if f, ok := codecs.Load(t); ok {
		return f.(decodeFunc), nil
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	return build(t, map[reflect.Type]*decodeFunc{})
}

// build returns the decodeFunc of t. A type that refers to itself gets an
// indirection to the function that is still being built.
func build(t reflect.Type, building map[reflect.Type]*decodeFunc) (decodeFunc, error) {
	if f, ok := codecs.Load(t); ok {
		return f.(decodeFunc), nil
	}
	if p, ok := building[t]; ok {
		return func(d *decoder, v reflect.Value) error { return (*p)(d, v) }, nil
	}
	p := new(decodeFunc)
	building[t] = p
	f, err := buildCodec(t, building)
	if err != nil {
		return nil, err
	}
	*p = f
	codecs.Store(t, f)
	return f, nil
}

func buildCodec(t reflect.Type, building map[reflect.Type]*decodeFunc) (decodeFunc, error) {
	switch t {
	case metav1TimeType:
		return decodeMetav1Time, nil
	case metav1DurationType:
		return decodeMetav1Duration, nil
	case timeType:
		return nil, fmt.Errorf("%w: %s (use metav1.Time)", ErrUnsupportedType, t)
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return decodeUnmarshaler, nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		return pointerCodec(t, building)
	case reflect.Struct:
		return structCodec(t, building)
	case reflect.Slice:
		return sliceCodec(t, building)
	case reflect.Map:
		return mapCodec(t, building)
	case reflect.String:
		return decodeString, nil
	case reflect.Bool:
		return decodeBool, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return decodeNumber, nil
	}
	return nil, fmt.Errorf("%w: %s", ErrUnsupportedType, t)
}

// field is one decodable field of a struct.
type field struct {
	name   string
	index  int
	decode decodeFunc
}

// structInfo is what the decoder needs to know about a struct type.
type structInfo struct {
	Fields
	fields []field
}

// structOf collects the fields of struct type t. Only exported fields
// count; a json tag renames or ("-") hides a field. Embedded fields are not
// supported: the wire types do not need them, and their promotion rules
// invite ambiguity.
func structOf(t reflect.Type, building map[reflect.Type]*decodeFunc) (*structInfo, error) {
	si := &structInfo{}
	names := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			return nil, fmt.Errorf("%w: embedded field %s in %s", ErrUnsupportedType, f.Name, t)
		}
		tag := f.Tag.Get("json")
		if !f.IsExported() || tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		dec, err := build(f.Type, building)
		if err != nil {
			return nil, err
		}
		si.fields = append(si.fields, field{name: name, index: i, decode: dec})
		names = append(names, name)
	}
	if len(si.fields) > 64 {
		return nil, fmt.Errorf("%w: %s has more than 64 fields", ErrUnsupportedType, t)
	}
	si.Fields = *NewFields(names...)
	return si, nil
}
