package simulate

import (
	"errors"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/promscaler/promscaler/internal/yamlpath"
)

// LineError is a scenario problem at a line of the file.
type LineError struct {
	// Line is the 1-based line; 0 when no line is known.
	Line int
	Err  error
}

func (e *LineError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %v", e.Line, e.Err)
	}
	return e.Err.Error()
}

func (e *LineError) Unwrap() error { return e.Err }

// atLine places a validation error ("path: message") at the line of the
// field its path names, or of the closest enclosing field there is.
func atLine(root *yaml.Node, err error) error {
	path, _, ok := strings.Cut(err.Error(), ": ")
	if !ok {
		return &LineError{Err: err}
	}
	return &LineError{Line: yamlpath.Line(root, path), Err: err}
}

// fileErrors formats a Parse error for a file: one "file:line: problem"
// per problem.
func fileErrors(file string, err error) error {
	var list []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	} else {
		list = []error{err}
	}
	out := make([]error, 0, len(list))
	for _, e := range list {
		var le *LineError
		if errors.As(e, &le) && le.Line > 0 {
			out = append(out, fmt.Errorf("%s:%d: %w", file, le.Line, le.Err))
		} else {
			out = append(out, fmt.Errorf("%s: %w", file, e))
		}
	}
	return errors.Join(out...)
}
