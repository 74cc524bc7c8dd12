package promclient

import (
	"errors"
	"fmt"
)

// scanner is a cursor over a JSON text that reads tokens and validates
// what it skips, with encoding/json's grammar: whitespace is space, tab, CR
// and LF; strings hold no control characters and only the escapes \" \\ \/
// \b \f \n \r \t \uXXXX; numbers are -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?.
type scanner struct {
	b []byte
	i int
}

// errTruncated is the cause of every error for an answer that ends early.
var errTruncated = errors.New("unexpected end of JSON input (truncated answer?)")

// errUnexpected describes the byte at the cursor (or the end of input).
func (s *scanner) errUnexpected(context string) error {
	if s.i >= len(s.b) {
		return errTruncated
	}
	return fmt.Errorf("invalid character %q %s at offset %d", s.b[s.i], context, s.i)
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		c := s.b[s.i]
		if c > ' ' {
			return
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek skips whitespace and returns the next byte, which must start a value.
func (s *scanner) peek() (byte, error) {
	s.ws()
	if s.i >= len(s.b) {
		return 0, errTruncated
	}
	switch c := s.b[s.i]; c {
	case '{', '[', '"', 't', 'f', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return c, nil
	}
	return 0, s.errUnexpected("looking for the beginning of a value")
}

// literal consumes the literal word (true, false or null) at the cursor.
func (s *scanner) literal(word string) error {
	for k := 0; k < len(word); k++ {
		if s.i >= len(s.b) {
			return errTruncated
		}
		if s.b[s.i] != word[k] {
			return s.errUnexpected("in literal " + word)
		}
		s.i++
	}
	return nil
}

// str consumes a string at the cursor (after whitespace) and returns its
// raw contents between the quotes. plain reports that they hold no escape
// and no byte outside ASCII, so they are the string itself.
func (s *scanner) str() (raw []byte, plain bool, err error) {
	s.ws()
	if s.i >= len(s.b) {
		return nil, false, errTruncated
	}
	if s.b[s.i] != '"' {
		return nil, false, s.errUnexpected("looking for the beginning of a string")
	}
	s.i++
	start := s.i
	b := s.b
	i := s.i
	for i < len(b) && plainByte[b[i]] {
		i++
	}
	if i < len(b) && b[i] == '"' {
		s.i = i + 1
		return b[start:i], true, nil
	}
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			s.i = i + 1
			return b[start:i], false, nil
		case c < 0x20:
			s.i = i
			return nil, false, s.errUnexpected("in string literal")
		case c == '\\':
			i++
			if i >= len(b) {
				return nil, false, errTruncated
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				i++
				for k := 0; k < 4; k++ {
					if i >= len(b) {
						return nil, false, errTruncated
					}
					if !isHex(b[i]) {
						s.i = i
						return nil, false, s.errUnexpected("in \\u hexadecimal character escape")
					}
					i++
				}
			default:
				s.i = i
				return nil, false, s.errUnexpected("in string escape code")
			}
		default:
			i++
		}
	}
	s.i = i
	return nil, false, errTruncated
}

// plainByte marks the bytes a string holds as themselves, up to its end:
// ASCII but for control characters, '"' and '\\'.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// num consumes a number at the cursor and returns its text.
func (s *scanner) num() ([]byte, error) {
	b := s.b
	start, i := s.i, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func(context string) error {
		if i >= len(b) {
			s.i = i
			return errTruncated
		}
		if b[i] < '0' || b[i] > '9' {
			s.i = i
			return s.errUnexpected(context)
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return nil
	}
	switch {
	case i >= len(b):
		s.i = i
		return nil, errTruncated
	case b[i] == '0':
		i++
	default:
		if err := digits("in numeric literal"); err != nil {
			return nil, err
		}
	}
	if i < len(b) && b[i] == '.' {
		i++
		if err := digits("after decimal point in numeric literal"); err != nil {
			return nil, err
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if err := digits("in exponent of numeric literal"); err != nil {
			return nil, err
		}
	}
	s.i = i
	return b[start:i], nil
}

// objStart consumes '{' and, if the object is empty, its '}'.
func (s *scanner) objStart() (empty bool, err error) {
	return s.open('{', '}', "looking for the beginning of an object")
}

// open consumes the opening byte of a container and, if the container is
// empty, its closing byte; what describes the position in errors.
func (s *scanner) open(opening, closing byte, what string) (empty bool, err error) {
	s.ws()
	if s.i >= len(s.b) {
		return false, errTruncated
	}
	if s.b[s.i] != opening {
		return false, s.errUnexpected(what)
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == closing {
		s.i++
		return true, nil
	}
	return false, nil
}

// key consumes a member name and the colon after it.
func (s *scanner) key() ([]byte, bool, error) {
	raw, plain, err := s.str()
	if err != nil {
		if s.i < len(s.b) && s.b[s.i] != '"' {
			return nil, false, s.errUnexpected("looking for the beginning of an object key string")
		}
		return nil, false, err
	}
	s.ws()
	if s.i >= len(s.b) {
		return nil, false, errTruncated
	}
	if s.b[s.i] != ':' {
		return nil, false, s.errUnexpected("after object key")
	}
	s.i++
	return raw, plain, nil
}

// objNext consumes the ',' (more is true) or '}' after a member's value.
func (s *scanner) objNext() (more bool, err error) {
	return s.next('}', "after object key:value pair")
}

// next consumes the ',' (more is true) or the closing byte after a
// container's member or element; what describes the position in errors.
func (s *scanner) next(closing byte, what string) (more bool, err error) {
	s.ws()
	if s.i >= len(s.b) {
		return false, errTruncated
	}
	switch s.b[s.i] {
	case ',':
		s.i++
		return true, nil
	case closing:
		s.i++
		return false, nil
	}
	return false, s.errUnexpected(what)
}

// arrStart consumes '[' and, if the array is empty, its ']'.
func (s *scanner) arrStart() (empty bool, err error) {
	return s.open('[', ']', "looking for the beginning of an array")
}

// arrNext consumes the ',' (more is true) or ']' after an element.
func (s *scanner) arrNext() (more bool, err error) {
	return s.next(']', "after array element")
}

// skip consumes one value of any kind, checking its syntax. It keeps its
// own stack of open containers, so deep nesting costs no Go stack.
func (s *scanner) skip() error {
	var stack []byte // '{' or '[' per open container
	for {
		// A value.
		c, err := s.peek()
		if err != nil {
			return err
		}
		switch c {
		case '{':
			empty, err := s.objStart()
			if err != nil {
				return err
			}
			if !empty {
				if _, _, err := s.key(); err != nil {
					return err
				}
				stack = append(stack, '{')
				continue
			}
		case '[':
			empty, err := s.arrStart()
			if err != nil {
				return err
			}
			if !empty {
				stack = append(stack, '[')
				continue
			}
		case '"':
			if _, _, err := s.str(); err != nil {
				return err
			}
		case 't':
			err = s.literal("true")
		case 'f':
			err = s.literal("false")
		case 'n':
			err = s.literal("null")
		default:
			_, err = s.num()
		}
		if err != nil {
			return err
		}
		// After a value: close containers until one has more.
		for {
			if len(stack) == 0 {
				return nil
			}
			var more bool
			if stack[len(stack)-1] == '{' {
				if more, err = s.objNext(); err != nil {
					return err
				}
				if more {
					if _, _, err := s.key(); err != nil {
						return err
					}
				}
			} else if more, err = s.arrNext(); err != nil {
				return err
			}
			if more {
				break
			}
			stack = stack[:len(stack)-1]
		}
	}
}
