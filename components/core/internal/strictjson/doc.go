// Package strictjson decodes JSON into Go values more strictly than
// encoding/json, and says where a document went wrong.
//
// The evaluator's callers are programs, so a request that does not match the
// wire types exactly is a bug worth reporting, not something to guess around.
// Compared with encoding/json, this decoder:
//
//   - rejects unknown fields, duplicate keys, keys that differ only in case,
//     invalid UTF-8, lone surrogate escapes, null where no pointer, slice or
//     map can hold it, and any data after the top-level value;
//   - reports every error with the field path in the document, in the form
//     the API machinery uses: nodes[3].state.observedAt;
//   - decodes metav1.Time and metav1.Duration itself rather than through
//     their UnmarshalJSON methods, with the same results, so that large
//     requests avoid thousands of nested decoder runs;
//   - copies the document once and cuts decoded strings from that copy, so
//     that a string costs no allocation of its own. Any decoded string keeps
//     the whole copy alive, which suits values that live as long as the
//     request they came from.
//
// Whatever it accepts, encoding/json accepts too and decodes to the same
// value; the fuzz test checks that.
//
// Reader exposes the same scanner and checks to decoders written by hand
// for one type, which avoid reflection and choose how values are
// allocated; such a decoder is checked against Unmarshal by a
// differential fuzz test next to it.
package strictjson
