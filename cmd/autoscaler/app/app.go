// Package app holds the autoscaler command: flags, subcommands and wiring.
package app

import (
	"fmt"
	"io"
	"os"
)

// Main runs the autoscaler command line and returns the process exit code.
//
//	autoscaler simulate -f SCENARIO [-o json|table]   replay a scenario through the decision core
func Main(args []string) int {
	return run(args, os.Stdout, os.Stderr)
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "simulate" {
		return runSimulate(args[1:], stdout, stderr)
	}
	fmt.Fprintln(stderr, "autoscaler: not implemented yet")
	return 2
}
