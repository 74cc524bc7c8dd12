package app

import (
	"fmt"
	"io"
)

// runCheckConfig implements "adapter check-config". Owned by the tools work.
func runCheckConfig(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "adapter check-config: not implemented yet")
	return 2
}

// runExplain implements "adapter explain". Owned by the tools work.
func runExplain(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "adapter explain: not implemented yet")
	return 2
}
