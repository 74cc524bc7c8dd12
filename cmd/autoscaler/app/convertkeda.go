package app

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/promscaler/promscaler/pkg/kedaconvert"
)

const convertKEDAUsage = `usage: autoscaler convert-keda -f FILE [-f FILE...] [--backend ADDRESS=NAME...] [--queries-out FILE]

Converts KEDA ScaledObjects (one or many YAML documents per file; "-" is
stdin) into the adapter's externalQueries entries, plain autoscaling/v2
HorizontalPodAutoscalers and their promscaler.io annotations. Prints the
externalQueries document, then the HPAs (or the HPAs only, with
--queries-out). Every field not converted is listed on stderr as
FILE:LINE: FIELD: REASON. Other kinds in the input are skipped (listed).

Guide: docs/migrate-from-keda.md.

Exit codes: 0 converted (notes or not), 1 an input could not be read or
decoded, 2 bad flags, 3 with --strict when anything was not converted.

flags:
`

// convertKEDAOptions are the flags of "autoscaler convert-keda".
type convertKEDAOptions struct {
	files      []string
	backends   []string
	queriesOut string
	strict     bool
}

func (o *convertKEDAOptions) validate() []error {
	var errs []error
	if len(o.files) == 0 {
		errs = append(errs, errors.New("-f: at least one file is required"))
	}
	for _, b := range o.backends {
		if addr, name, ok := strings.Cut(b, "="); !ok || addr == "" || name == "" {
			errs = append(errs, fmt.Errorf("--backend %q: want ADDRESS=NAME", b))
		}
	}
	return errs
}

// runConvertKEDA implements "autoscaler convert-keda".
func runConvertKEDA(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	o := &convertKEDAOptions{}
	fs := pflag.NewFlagSet("autoscaler convert-keda", pflag.ContinueOnError)
	fs.StringArrayVarP(&o.files, "filename", "f", nil, "ScaledObject manifests (YAML, several documents allowed; - for stdin)")
	fs.StringArrayVar(&o.backends, "backend", nil, "ADDRESS=NAME: send the queries of triggers with this serverAddress to the adapter backend NAME (--backends-config)")
	fs.StringVar(&o.queriesOut, "queries-out", "", "write the externalQueries document to this file instead of stdout")
	fs.BoolVar(&o.strict, "strict", false, "exit 3 when any field was not converted")
	if code, ok := parseFlags(fs, args, convertKEDAUsage, stdout, stderr, func() []error {
		if fs.NArg() > 0 {
			return []error{fmt.Errorf("unexpected arguments %q", fs.Args())}
		}
		return o.validate()
	}); !ok {
		return code
	}
	opts := kedaconvert.Options{Backends: map[string]string{}}
	for _, b := range o.backends {
		addr, name, _ := strings.Cut(b, "=")
		opts.Backends[addr] = name
	}
	var docs []kedaconvert.Document
	var notes []kedaconvert.Note
	for _, f := range o.files {
		d, n, err := readKEDA(f, stdin)
		if err != nil {
			fmt.Fprintf(stderr, "autoscaler convert-keda: %v\n", err)
			return 1
		}
		docs, notes = append(docs, d...), append(notes, n...)
	}
	r := kedaconvert.Convert(docs, opts)
	r.Notes = append(notes, r.Notes...)
	if err := writeConverted(o.queriesOut, r, stdout); err != nil {
		fmt.Fprintf(stderr, "autoscaler convert-keda: %v\n", err)
		return 1
	}
	for _, n := range r.Notes {
		fmt.Fprintln(stderr, n)
	}
	if o.strict && len(r.Notes) > 0 {
		return 3
	}
	return 0
}

func readKEDA(file string, stdin io.Reader) ([]kedaconvert.Document, []kedaconvert.Note, error) {
	var data []byte
	var err error
	if file == "-" {
		file, data = "stdin", nil
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", file, err)
	}
	return kedaconvert.Read(file, data)
}

func writeConverted(queriesOut string, r kedaconvert.Result, stdout io.Writer) error {
	if queriesOut == "" {
		return kedaconvert.Write(stdout, r)
	}
	var b bytes.Buffer
	if err := kedaconvert.WriteQueries(&b, r); err != nil {
		return err
	}
	if err := os.WriteFile(queriesOut, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", queriesOut, err)
	}
	return kedaconvert.WriteHPAs(stdout, r)
}
