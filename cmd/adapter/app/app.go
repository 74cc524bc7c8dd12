// Package app holds the adapter command: flags, subcommands and wiring.
package app

import (
	"fmt"
	"os"
)

// Main runs the adapter command line and returns the process exit code.
func Main(args []string) int {
	fmt.Fprintln(os.Stderr, "adapter: not implemented yet")
	return 2
}
