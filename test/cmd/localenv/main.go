// Command localenv runs the local promscaler environment of test/e2e/framework
// outside of tests:
//
//	localenv up   [flags]   start everything, write the env file, run until SIGTERM/SIGINT
//	localenv demo [flags]   start everything, scale a demo app up and down live, then stop
//
// hack/up.sh, hack/down.sh and hack/demo.sh drive it (make up, make down, make demo).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 || (args[0] != "up" && args[0] != "demo") {
		fmt.Fprintln(os.Stderr, "usage: localenv up|demo [flags] (see -h)")
		return 2
	}
	o := defaultOptions()
	fs := flag.NewFlagSet("localenv "+args[0], flag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if errs := o.validate(); len(errs) > 0 {
		for _, err := range errs {
			fmt.Fprintln(os.Stderr, "localenv:", err)
		}
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var err error
	if args[0] == "up" {
		err = runUp(ctx, o)
	} else {
		err = runDemo(ctx, o)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "localenv:", err)
		return 1
	}
	return 0
}
