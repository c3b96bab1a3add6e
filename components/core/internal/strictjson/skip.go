package strictjson

// skipValue consumes one well-formed value of any kind without decoding it.
// It keeps its own stack of open brackets, so depth costs no recursion.
func (d *decoder) skipValue() error {
	var open []byte
	for {
		if err := d.skipScalarOrOpen(&open); err != nil {
			return err
		}
		// Close every container that ends here, then expect the next
		// member or element.
		for {
			if len(open) == 0 {
				return nil
			}
			c := d.peek()
			if c == ',' {
				d.pos++
				if open[len(open)-1] == '{' {
					if err := d.skipKey(); err != nil {
						return err
					}
				}
				break
			}
			if want := closer(open[len(open)-1]); c != want {
				return d.errorf("expected ',' or '%c', found %s", want, d.found())
			}
			d.pos++
			open = open[:len(open)-1]
		}
	}
}

// skipScalarOrOpen consumes a scalar, an empty container, or the opening of
// a container and its first key.
func (d *decoder) skipScalarOrOpen(open *[]byte) error {
	for {
		switch c := d.peek(); c {
		case '{', '[':
			if len(*open) >= maxDepth {
				return d.errorf("the document nests deeper than %d levels", maxDepth)
			}
			d.pos++
			if d.peek() == closer(c) {
				d.pos++
				return nil
			}
			*open = append(*open, c)
			if c == '{' {
				if err := d.skipKey(); err != nil {
					return err
				}
			}
		case '"':
			_, _, err := d.rawStr()
			return err
		case 't':
			return d.literal("true")
		case 'f':
			return d.literal("false")
		case 'n':
			return d.literal("null")
		default:
			if c == '-' || (c >= '0' && c <= '9') {
				_, _, err := d.number()
				return err
			}
			return d.errorf("expected a value, found %s", d.found())
		}
	}
}

func (d *decoder) skipKey() error {
	if _, _, err := d.rawStr(); err != nil {
		return err
	}
	if d.peek() != ':' {
		return d.errorf("expected ':' after the field name, found %s", d.found())
	}
	d.pos++
	return nil
}

func closer(open byte) byte {
	if open == '{' {
		return '}'
	}
	return ']'
}
