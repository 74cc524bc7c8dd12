// Package app holds the autoscaler command: flags, subcommands and wiring.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"

	"github.com/promscaler/promscaler/internal/version"
)

const usage = `usage:
  autoscaler [flags]                                 run the HPA controller (see --help)
  autoscaler explain [NAMESPACE/]HPA [-o text|json]  explain the decision the HPA controller would take now
  autoscaler simulate -f SCENARIO [-o json|table]    replay a scenario through the decision core
  autoscaler convert-keda -f SCALEDOBJECTS           convert KEDA ScaledObjects to externalQueries, HPAs and annotations
  autoscaler --version                               print the version and exit
`

// Main runs the autoscaler command line and returns the process exit code.
//
//	autoscaler [flags]                                 run the HPA controller
//	autoscaler explain [NAMESPACE/]HPA [-o text|json]  explain the decision the HPA controller would take now
//	autoscaler simulate -f SCENARIO [-o json|table]    replay a scenario through the decision core
//	autoscaler convert-keda -f SCALEDOBJECTS           convert KEDA ScaledObjects
func Main(args []string) int {
	return run(args, os.Stdout, os.Stderr)
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "simulate":
			return runSimulate(args[1:], stdout, stderr)
		case "convert-keda":
			return runConvertKEDA(args[1:], os.Stdin, stdout, stderr)
		case "--version", "version":
			fmt.Fprintln(stdout, "autoscaler", version.Get())
			return 0
		case "explain":
			return runExplain("autoscaler explain", args[1:], stdout, stderr, nil)
		case "help":
			fmt.Fprint(stdout, usage)
			return 0
		}
	}
	return runController(args, stdout, stderr)
}

// runController parses the controller flags and runs it until SIGINT or
// SIGTERM. Exit codes: 0 after a signal, 1 when it fails, 2 on bad flags.
func runController(args []string, stdout, stderr io.Writer) int {
	o := NewOptions()
	fs := pflag.NewFlagSet("autoscaler", pflag.ContinueOnError)
	sections := o.Flags()
	addSections(fs, sections)
	fs.Usage = func() {
		fmt.Fprint(stdout, usage)
		cliflag.PrintSections(stdout, sections, 0)
	}
	if code, ok := parseFlags(fs, args, usage, stdout, stderr, func() []error {
		if fs.NArg() > 0 {
			return []error{fmt.Errorf("unexpected argument %q (subcommands: explain, simulate, convert-keda)", fs.Arg(0))}
		}
		return o.Validate()
	}); !ok {
		return code
	}
	cfg, err := o.Config()
	if err != nil {
		fmt.Fprintf(stderr, "autoscaler: %v\n", err)
		return 2
	}
	cc, err := cfg.Complete()
	if err != nil {
		fmt.Fprintf(stderr, "autoscaler: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer klog.Flush()
	if err := cc.Run(ctx); err != nil {
		klog.ErrorS(err, "Autoscaler stopped")
		return 1
	}
	return 0
}

// parseFlags parses args into fs, prints help to stdout on --help (fs's
// Usage when set, else help then the flags) and each bad flag or validate
// error to stderr as "NAME: error". ok is false when the command stops
// there, with code 0 after --help, 2 otherwise.
func parseFlags(fs *pflag.FlagSet, args []string, help string, stdout, stderr io.Writer, validate func() []error) (code int, ok bool) {
	fs.SetOutput(stderr)
	if fs.Usage == nil {
		fs.Usage = func() {
			fmt.Fprint(stdout, help)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
		}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0, false
		}
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		return 2, false
	}
	if errs := validate(); len(errs) > 0 {
		for _, err := range errs {
			fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		}
		return 2, false
	}
	return 0, true
}
