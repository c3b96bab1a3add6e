package main

import (
	"encoding/json"
	"testing"
)

func TestDescribe(t *testing.T) {
	schema := []byte(`{"type": "object", "properties": {
	  "a": {"type": "string", "description": "stale"},
	  "s": {"type": "object", "properties": {"b": {"type": "integer"}, "c": {"$ref": "#/definitions/x"}}},
	  "u": {"type": "boolean"}}, "definitions": {"x": {"type": "string", "pattern": "^a<b>$"}}}`)
	values := []byte("# The A.\n# Continued.\n#\n#   an example, left out\na: x\n# A section.\ns:\n  # The B.\n  b: 1\n  c: y\nu: true\n# Not in the schema.\nv: 1\n")
	out, err := describe(schema, values)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	props := got["properties"].(map[string]any)
	if d := props["a"].(map[string]any)["description"]; d != "The A. Continued." {
		t.Errorf("a: %v", d)
	}
	s := props["s"].(map[string]any)
	if s["description"] != "A section." || s["properties"].(map[string]any)["b"].(map[string]any)["description"] != "The B." {
		t.Errorf("s: %v", s)
	}
	if _, ok := s["properties"].(map[string]any)["c"].(map[string]any)["description"]; ok {
		t.Errorf("c has a description without a comment")
	}
	if _, ok := props["v"]; ok {
		t.Error("a key the schema does not have was added")
	}
	if p := got["definitions"].(map[string]any)["x"].(map[string]any)["pattern"]; p != "^a<b>$" {
		t.Errorf("pattern %v", p)
	}
	again, err := describe(out, values)
	if err != nil || string(again) != string(out) {
		t.Errorf("not idempotent:\n%s\n%s", out, again)
	}
}
