package app

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"
	genericapiserver "k8s.io/apiserver/pkg/server"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	"k8s.io/klog/v2"
)

// runServer runs the aggregated API server until SIGTERM/SIGINT:
// flags -> Validate (every bad flag at once) -> Config -> Complete -> Run.
func runServer(args []string, stdout, stderr io.Writer) int {
	defer klog.Flush()
	o, code, ok := parseServerFlags(args, stdout, stderr)
	if !ok {
		return code
	}
	// Flushes the logs every --log-flush-frequency.
	logs.InitLogs()
	if err := serve(genericapiserver.SetupSignalContext(), o); err != nil {
		fmt.Fprintf(stderr, "adapter: %v\n", err)
		return 1
	}
	return 0
}

// parseServerFlags parses and validates the server's flags. When they
// cannot be served it reports why on stderr and returns ok false with the
// exit code: 0 for --help (the usage and the flags by section on stdout),
// 2 for a bad argument or flag.
func parseServerFlags(args []string, stdout, stderr io.Writer) (o *ServerOptions, code int, ok bool) {
	o = NewServerOptions()
	fs := pflag.NewFlagSet("adapter", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	sections := o.Flags()
	addSections(fs, sections)
	o.flags = fs
	fs.Usage = func() {
		fmt.Fprint(stdout, usage)
		cliflag.PrintSections(stdout, sections, 0)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, 0, false
		}
		fmt.Fprintf(stderr, "adapter: %v\n", err)
		return nil, 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "adapter: unexpected argument %q (subcommands: check-config, explain)\n", fs.Arg(0))
		return nil, 2, false
	}
	if errs := o.Validate(); len(errs) > 0 {
		fmt.Fprintln(stderr, "adapter: invalid flags:")
		for _, err := range errs {
			fmt.Fprintf(stderr, "  %v\n", err)
		}
		return nil, 2, false
	}
	return o, 0, true
}

// serve builds the server from validated options and runs it until ctx ends.
func serve(ctx context.Context, o *ServerOptions) error {
	cfg, err := o.Config()
	if err != nil {
		return err
	}
	srv, err := cfg.Complete()
	if err != nil {
		return err
	}
	return srv.Run(ctx)
}
