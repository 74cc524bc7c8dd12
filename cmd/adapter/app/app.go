// Package app holds the adapter command: flags, subcommands and wiring.
package app

import (
	"fmt"
	"io"
	"os"
)

// Main runs the adapter command line and returns the process exit code.
//
//	adapter [server flags]            serve the metrics APIs
//	adapter check-config [flags]      validate a config offline
//	adapter explain [flags]           show the PromQL a request would run, or why none
func Main(args []string) int {
	return run(args, os.Stdout, os.Stderr)
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "check-config":
			return runCheckConfig(args[1:], stdout, stderr)
		case "explain":
			return runExplain(args[1:], stdout, stderr)
		case "help", "-h", "--help":
			if len(args) == 1 {
				fmt.Fprintln(stdout, "usage: adapter [server flags] | adapter check-config --config FILE [--series FILE] | adapter explain ...")
				return 0
			}
		}
	}
	return runServer(args, stdout, stderr)
}
