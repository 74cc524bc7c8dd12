// Package app holds the autoscaler command: flags, subcommands and wiring.
package app

import (
	"fmt"
	"os"
)

// Main runs the autoscaler command line and returns the process exit code.
func Main(args []string) int {
	fmt.Fprintln(os.Stderr, "autoscaler: not implemented yet")
	return 2
}
