package rules

import (
	"fmt"
	"strconv"
	"strings"
)

// parseSelectorBody is a small PromQL lexer for tests: it parses the inside
// of a selector's braces ("a=\"x\",b=~\"y\"") back into matchers, so tests can
// prove that rendered values stay inside their string literals. It accepts
// exactly what PromQL accepts for classic label names and double-quoted
// strings, and rejects anything else.
func parseSelectorBody(s string) ([]Matcher, error) {
	var out []Matcher
	i := 0
	for i < len(s) {
		j := i
		for j < len(s) && (s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || (j > i && s[j] >= '0' && s[j] <= '9')) {
			j++
		}
		if j == i {
			return nil, fmt.Errorf("offset %d: expected a label name in %q", i, s)
		}
		name := s[i:j]
		i = j
		var op MatchOp
		switch {
		case strings.HasPrefix(s[i:], "=~"):
			op = MatchRegexp
		case strings.HasPrefix(s[i:], "!~"):
			op = MatchNotRegexp
		case strings.HasPrefix(s[i:], "!="):
			op = MatchNotEqual
		case strings.HasPrefix(s[i:], "="):
			op = MatchEqual
		default:
			return nil, fmt.Errorf("offset %d: expected an operator in %q", i, s)
		}
		i += len(op)
		lit, n, err := lexString(s[i:])
		if err != nil {
			return nil, fmt.Errorf("offset %d: %w", i, err)
		}
		i += n
		out = append(out, Matcher{Name: name, Op: op, Value: lit})
		if i == len(s) {
			break
		}
		if s[i] != ',' {
			return nil, fmt.Errorf("offset %d: expected ',' in %q", i, s)
		}
		i++
	}
	return out, nil
}

// lexString reads one double-quoted PromQL string at the start of s and
// returns its value and length. Like the PromQL lexer, it rejects raw
// newlines and unknown escapes.
func lexString(s string) (string, int, error) {
	if s == "" || s[0] != '"' {
		return "", 0, fmt.Errorf("expected '\"' at %q", s)
	}
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 >= len(s) || !strings.ContainsRune(`abfnrtv\"01234567xuU`, rune(s[i+1])) {
				return "", 0, fmt.Errorf("bad escape in %q", s)
			}
			i++
		case '\n':
			return "", 0, fmt.Errorf("raw newline in string %q", s)
		case '"':
			v, err := strconv.Unquote(s[:i+1])
			if err != nil {
				return "", 0, err
			}
			return v, i + 1, nil
		}
	}
	return "", 0, fmt.Errorf("unterminated string %q", s)
}

// parseVectorSelector parses "series{matchers}" as rendered by the template
// "<<.Series>>{<<.LabelMatchers>>}".
func parseVectorSelector(s string) (string, []Matcher, error) {
	open := strings.IndexByte(s, '{')
	if open < 0 || !strings.HasSuffix(s, "}") {
		return "", nil, fmt.Errorf("not a vector selector: %q", s)
	}
	ms, err := parseSelectorBody(s[open+1 : len(s)-1])
	return s[:open], ms, err
}
