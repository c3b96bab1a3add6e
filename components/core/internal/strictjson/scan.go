package strictjson

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

func (d *decoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// peek returns the next non-space byte without consuming it, or 0 at the
// end of the document.
func (d *decoder) peek() byte {
	// Compact documents, as every encoder here writes them, have no space
	// between tokens: the first byte is the common answer.
	if d.pos < len(d.data) && d.data[d.pos] > ' ' {
		return d.data[d.pos]
	}
	d.skipSpace()
	if d.pos == len(d.data) {
		return 0
	}
	return d.data[d.pos]
}

// found names the token at the current position, for error messages.
func (d *decoder) found() string {
	c := d.peek()
	switch {
	case c == 0:
		return "the end of the document"
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == '-' || (c >= '0' && c <= '9'):
		return "a number"
	case d.hasPrefix("true") || d.hasPrefix("false"):
		return "a boolean"
	case d.hasPrefix("null"):
		return "null"
	}
	r, _ := utf8.DecodeRuneInString(d.data[d.pos:])
	return strconv.QuoteRune(r)
}

func (d *decoder) hasPrefix(word string) bool {
	return len(d.data)-d.pos >= len(word) && d.data[d.pos:d.pos+len(word)] == word
}

// literal consumes the keyword word (true, false or null).
func (d *decoder) literal(word string) error {
	if !d.hasPrefix(word) {
		return d.errorf("invalid literal, expected %s", word)
	}
	d.pos += len(word)
	return nil
}

// str consumes a string token and returns its contents. A string without
// escapes is a substring of the document, which costs no allocation; the
// decoded value keeps the document alive.
func (d *decoder) str() (string, error) {
	s, _, err := d.rawStr()
	return s, err
}

// key consumes a member name.
func (d *decoder) key() (string, error) {
	s, _, err := d.rawStr()
	return s, err
}

// plainByte marks the bytes a string may hold as they are: printable ASCII
// other than the quote and the backslash. One lookup per byte keeps the
// scan of long documents fast.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// rawStr consumes a string token and returns its decoded contents, and
// whether it had escapes. Strings without escapes are cut straight from
// the document.
func (d *decoder) rawStr() (string, bool, error) {
	if d.peek() != '"' {
		return "", false, d.errorf("expected a string, found %s", d.found())
	}
	start := d.pos + 1
	for i := start; i < len(d.data); {
		c := d.data[i]
		if plainByte[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			d.pos = i + 1
			return d.data[start:i], false, nil
		case c == '\\':
			raw, err := d.escapedStr(start)
			return string(raw), true, err
		case c < 0x20:
			d.pos = i
			return "", false, d.errorf("control character %#02x in string", c)
		default:
			r, size := utf8.DecodeRuneInString(d.data[i:])
			if r == utf8.RuneError && size == 1 {
				d.pos = i
				return "", false, d.errorf("invalid UTF-8 in string")
			}
			i += size
		}
	}
	d.pos = len(d.data)
	return "", false, d.errorf("unterminated string")
}

// escapedStr decodes a string that contains escapes, from its first byte.
func (d *decoder) escapedStr(start int) ([]byte, error) {
	buf := make([]byte, 0, 32)
	i := start
	for i < len(d.data) {
		c := d.data[i]
		switch {
		case c == '"':
			d.pos = i + 1
			return buf, nil
		case c < 0x20:
			d.pos = i
			return nil, d.errorf("control character %#02x in string", c)
		case c != '\\':
			r, size := utf8.DecodeRuneInString(d.data[i:])
			if r == utf8.RuneError && size == 1 {
				d.pos = i
				return nil, d.errorf("invalid UTF-8 in string")
			}
			buf = append(buf, d.data[i:i+size]...)
			i += size
			continue
		}
		if i+1 >= len(d.data) {
			break
		}
		esc := d.data[i+1]
		i += 2
		switch esc {
		case '"', '\\', '/':
			buf = append(buf, esc)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, n, err := d.unicodeEscape(i)
			if err != nil {
				return nil, err
			}
			buf = utf8.AppendRune(buf, r)
			i = n
		default:
			d.pos = i - 1
			return nil, d.errorf("invalid escape \\%c in string", esc)
		}
	}
	d.pos = len(d.data)
	return nil, d.errorf("unterminated string")
}

// unicodeEscape decodes the four hex digits at i, and a second \uXXXX when
// the first is a high surrogate. It returns the rune and where it ended.
func (d *decoder) unicodeEscape(i int) (rune, int, error) {
	r, ok := hex4(d.data, i)
	if !ok {
		d.pos = i
		return 0, 0, d.errorf("invalid \\u escape in string")
	}
	i += 4
	if !utf16.IsSurrogate(r) {
		return r, i, nil
	}
	if i+1 < len(d.data) && d.data[i] == '\\' && d.data[i+1] == 'u' {
		if r2, ok := hex4(d.data, i+2); ok {
			if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
				return dec, i + 6, nil
			}
		}
	}
	d.pos = i
	return 0, 0, d.errorf("lone UTF-16 surrogate in string")
}

func hex4(b string, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for j := i; j < i+4; j++ {
		c := b[j]
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// number consumes a number token and returns its text and whether it is an
// integer (no fraction, no exponent). It enforces the JSON grammar.
func (d *decoder) number() (string, bool, error) {
	start := d.pos
	i := start
	digits := func() int {
		n := 0
		for i < len(d.data) && d.data[i] >= '0' && d.data[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(d.data) && d.data[i] == '-' {
		i++
	}
	lead := i
	if n := digits(); n == 0 || (n > 1 && d.data[lead] == '0') {
		d.pos = i
		return "", false, d.errorf("invalid number")
	}
	integer := true
	if i < len(d.data) && d.data[i] == '.' {
		i++
		integer = false
		if digits() == 0 {
			d.pos = i
			return "", false, d.errorf("invalid number")
		}
	}
	if i < len(d.data) && (d.data[i] == 'e' || d.data[i] == 'E') {
		i++
		integer = false
		if i < len(d.data) && (d.data[i] == '+' || d.data[i] == '-') {
			i++
		}
		if digits() == 0 {
			d.pos = i
			return "", false, d.errorf("invalid number")
		}
	}
	d.pos = i
	return d.data[start:i], integer, nil
}
