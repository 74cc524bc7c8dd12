package app

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/promscaler/promscaler/pkg/simulate"
)

const simulateUsage = `usage: autoscaler simulate -f SCENARIO [-o json|table] [--history]

Replays a scenario (an HPA, its target, pods, metric values over time, and
optionally the controllers' memory before it) through kube-controller-manager's
decision core and, for HPAs with promscaler.io annotations, promscaler's
scale-to-zero and fallback decisions; prints every step.

Scenario schema: docs/simulate.md, section "Scenario format"
(https://github.com/promscaler/promscaler/blob/main/docs/simulate.md#scenario-format);
examples with their outputs: docs/examples/simulate/.

Exit codes: 0 success, 1 the scenario could not be read or is invalid (each
problem as FILE:LINE: field: message), 2 bad flags.

flags:
`

// simulateOptions are the flags of "autoscaler simulate".
type simulateOptions struct {
	file    string
	output  string
	history bool
}

func (o *simulateOptions) validate() []error {
	var errs []error
	if o.file == "" {
		errs = append(errs, errors.New("-f: a scenario file is required"))
	}
	if o.output != "json" && o.output != "table" {
		errs = append(errs, fmt.Errorf("-o: must be json or table, got %q", o.output))
	}
	return errs
}

// runSimulate implements "autoscaler simulate": it replays a scenario
// (docs/simulate.md) through the HPA decision core and prints each step.
func runSimulate(args []string, stdout, stderr io.Writer) int {
	o := &simulateOptions{}
	fs := flag.NewFlagSet("autoscaler simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.file, "f", "", "scenario file (YAML; schema in docs/simulate.md, \"Scenario format\")")
	fs.StringVar(&o.output, "o", "table", "output format: json or table")
	fs.BoolVar(&o.history, "history", false, "also show the controllers' memory after each step (recommendations, scale events, promscaler's state)")
	fs.Usage = func() {
		fmt.Fprint(stderr, simulateUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "autoscaler simulate: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if errs := o.validate(); len(errs) > 0 {
		for _, err := range errs {
			fmt.Fprintf(stderr, "autoscaler simulate: %v\n", err)
		}
		return 2
	}
	s, err := simulate.Load(o.file)
	if err != nil {
		fmt.Fprintf(stderr, "autoscaler simulate: %v\n", err)
		return 1
	}
	res, err := simulate.Run(s, simulate.Options{History: o.history})
	if err != nil {
		fmt.Fprintf(stderr, "autoscaler simulate: %v\n", err)
		return 1
	}
	if o.output == "json" {
		err = res.WriteJSON(stdout)
	} else {
		err = res.WriteTable(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "autoscaler simulate: %v\n", err)
		return 1
	}
	return 0
}
