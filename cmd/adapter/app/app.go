// Package app holds the adapter command: flags, subcommands and wiring.
package app

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/promscaler/promscaler/internal/version"
)

// Main runs the adapter command line and returns the process exit code.
//
//	adapter [server flags]            serve the metrics APIs
//	adapter check-config [flags]      validate a config offline
//	adapter explain [flags]           show the PromQL a request would run, or why none
func Main(args []string) int {
	return run(args, os.Stdout, os.Stderr)
}

const usage = `Usage:
  adapter [flags]                 serve custom.metrics.k8s.io, external.metrics.k8s.io and metrics.k8s.io
  adapter check-config --help     validate a rules file offline; show what discovery would serve
  adapter explain --help          show the PromQL a request runs, or why a metric is not served
  adapter --version               print the version and exit
`

func run(args []string, stdout, stderr io.Writer) int {
	args = withoutProgramPath(args)
	if len(args) > 0 {
		switch args[0] {
		case "--version", "version":
			fmt.Fprintln(stdout, "adapter", version.Get())
			return 0
		case "check-config":
			return runCheckConfig(args[1:], stdout, stderr)
		case "explain":
			return runExplain(args[1:], stdout, stderr)
		case "help", "-h", "--help":
			if len(args) == 1 {
				return runServer([]string{"--help"}, stdout, stderr)
			}
		}
	}
	return runServer(args, stdout, stderr)
}

// withoutProgramPath drops a leading argument that names the program
// itself, a path ("/adapter", "./adapter") or its bare name: a container's
// args may start with it, as the prometheus-adapter Helm chart renders them
// ("/adapter", then the flags). prometheus-adapter ignores it, and so do
// we. Any other argument is left for the flag parser to reject.
func withoutProgramPath(args []string) []string {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return args
	}
	if strings.Contains(args[0], "/") || args[0] == "adapter" {
		return args[1:]
	}
	return args
}
