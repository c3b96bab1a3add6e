package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// describe sets the "description" of every key of values.yaml that has a
// comment in the schema, and returns the schema in the canonical layout.
// A key the schema does not describe is left out: the schema, not this
// command, says what is allowed.
func describe(schema, values []byte) ([]byte, error) {
	var sdoc, vdoc yaml.Node
	if err := yaml.Unmarshal(schema, &sdoc); err != nil {
		return nil, fmt.Errorf("values.schema.json: %w", err)
	}
	if err := yaml.Unmarshal(values, &vdoc); err != nil {
		return nil, fmt.Errorf("values.yaml: %w", err)
	}
	if len(sdoc.Content) != 1 || sdoc.Content[0].Kind != yaml.MappingNode || len(vdoc.Content) != 1 {
		return nil, fmt.Errorf("values.schema.json: want an object")
	}
	walk(vdoc.Content[0], sdoc.Content[0])
	var buf bytes.Buffer
	if err := emit(&buf, sdoc.Content[0], 0, 0); err != nil {
		return nil, err
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

// walk describes the keys of the values mapping v in the schema object s.
func walk(v, s *yaml.Node) {
	props := get(s, "properties")
	if props == nil || v.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		p := get(props, k.Value)
		if p == nil || p.Kind != yaml.MappingNode {
			continue
		}
		if d := description(k.HeadComment); d != "" {
			set(p, "description", d)
		}
		walk(val, p)
	}
}

// get returns the value of key in the mapping m, or nil.
func get(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// set puts key: value (a string) into the mapping m, first among its keys
// when it is new.
func set(m *yaml.Node, key, value string) {
	if n := get(m, key); n != nil {
		n.Kind, n.Tag, n.Value, n.Content = yaml.ScalarNode, "!!str", value, nil
		return
	}
	m.Content = append([]*yaml.Node{
		{Kind: yaml.ScalarNode, Tag: "!!str", Value: key},
		{Kind: yaml.ScalarNode, Tag: "!!str", Value: value},
	}, m.Content...)
}

// maxLine is the longest line an object or array is kept on.
const maxLine = 110

// emit writes n, at the given depth and starting at column col, as JSON:
// objects and arrays on one line when they fit, one member per line
// otherwise.
func emit(buf *bytes.Buffer, n *yaml.Node, depth, col int) error {
	if flat, err := compact(n); err == nil && (n.Kind == yaml.ScalarNode || col+len(flat) <= maxLine) {
		buf.WriteString(flat)
		return nil
	} else if err != nil {
		return err
	}
	pad := strings.Repeat("  ", depth+1)
	closing := strings.Repeat("  ", depth)
	switch n.Kind {
	case yaml.MappingNode:
		buf.WriteString("{\n")
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, err := jsonString(n.Content[i].Value)
			if err != nil {
				return err
			}
			buf.WriteString(pad + key + ": ")
			if err := emit(buf, n.Content[i+1], depth+1, len(pad)+len(key)+2); err != nil {
				return err
			}
			if i+2 < len(n.Content) {
				buf.WriteByte(',')
			}
			buf.WriteByte('\n')
		}
		buf.WriteString(closing + "}")
	case yaml.SequenceNode:
		buf.WriteString("[\n")
		for i, c := range n.Content {
			buf.WriteString(pad)
			if err := emit(buf, c, depth+1, len(pad)); err != nil {
				return err
			}
			if i+1 < len(n.Content) {
				buf.WriteByte(',')
			}
			buf.WriteByte('\n')
		}
		buf.WriteString(closing + "]")
	default:
		return fmt.Errorf("line %d: cannot lay out a %v", n.Line, n.Kind)
	}
	return nil
}

// compact is n as JSON on one line.
func compact(n *yaml.Node) (string, error) {
	switch n.Kind {
	case yaml.MappingNode:
		parts := make([]string, 0, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, err := jsonString(n.Content[i].Value)
			if err != nil {
				return "", err
			}
			v, err := compact(n.Content[i+1])
			if err != nil {
				return "", err
			}
			parts = append(parts, k+": "+v)
		}
		return "{" + strings.Join(parts, ", ") + "}", nil
	case yaml.SequenceNode:
		parts := make([]string, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := compact(c)
			if err != nil {
				return "", err
			}
			parts = append(parts, v)
		}
		return "[" + strings.Join(parts, ", ") + "]", nil
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str":
			return jsonString(n.Value)
		case "!!int", "!!float", "!!bool", "!!null":
			return n.Value, nil
		}
		return "", fmt.Errorf("line %d: a scalar tagged %s is not JSON", n.Line, n.Tag)
	}
	return "", fmt.Errorf("line %d: cannot write a %v as JSON", n.Line, n.Kind)
}

// jsonString quotes s as JSON does, without escaping HTML.
func jsonString(s string) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}
