package reload

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/promscaler/promscaler/pkg/config"
	"github.com/promscaler/promscaler/pkg/naming"
)

// Rules is a loaded configuration: every file parsed and the rules of all
// of them compiled into one set.
type Rules struct {
	// Configs are the parsed files, in source order.
	Configs []*config.Config
	// Set is every file's rules, merged (naming.Merge).
	Set *naming.RuleSet
	// Warnings are the files' warnings, the queries Prometheus would
	// reject that were loaded anyway, and compile warnings, each naming
	// its file.
	Warnings []string
}

// Load parses every file (see Parse), compiles it against mapper and
// merges the rules (see Compile).
func Load(files []File, mapper meta.RESTMapper, strict func(path string) bool) (*Rules, error) {
	cfgs, warnings, err := Parse(files, strict)
	if err != nil {
		return nil, err
	}
	set, more, err := Compile(cfgs, mapper)
	if err != nil {
		return nil, err
	}
	return &Rules{Configs: cfgs, Set: set, Warnings: append(warnings, more...)}, nil
}

// Parse parses every file. A file that does not parse is an error naming
// its file, line and rule. A query Prometheus would reject
// (config.Config.QueryErrors) is an error in a file for which strict
// returns true, and a warning in the others: the adapter loads such a file
// at startup, as prometheus-adapter does (strict with --strict), and
// refuses it on reload (strict for the file that changed). The warnings
// name their file.
func Parse(files []File, strict func(path string) bool) ([]*config.Config, []string, error) {
	var cfgs []*config.Config
	var warnings []string
	var errs []error
	for _, f := range files {
		cfg, err := config.Parse(f.Data, f.Path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, w := range cfg.Warnings() {
			warnings = append(warnings, w.Error())
		}
		if qerrs := cfg.QueryErrors(); len(qerrs) > 0 {
			if strict != nil && strict(f.Path) {
				errs = append(errs, qerrs)
				continue
			}
			for _, e := range qerrs {
				warnings = append(warnings, "loaded anyway, its queries will fail: "+e.Error())
			}
		}
		cfgs = append(cfgs, cfg)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	return cfgs, warnings, nil
}

// Compile compiles each configuration against mapper and merges them, in
// order (naming.Merge). Errors and warnings name their file.
func Compile(cfgs []*config.Config, mapper meta.RESTMapper) (*naming.RuleSet, []string, error) {
	sets := make([]*naming.RuleSet, 0, len(cfgs))
	var errs []error
	for _, cfg := range cfgs {
		rs, err := naming.Compile(cfg, mapper)
		if err != nil {
			errs = append(errs, fileError(fileOf(cfg), err))
			continue
		}
		sets = append(sets, rs)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	set, err := naming.Merge(sets)
	if err != nil {
		return nil, nil, err
	}
	warnings := set.Warnings()
	if len(cfgs) == 1 && fileOf(cfgs[0]) != "" {
		// A single file's compile warnings do not name it yet.
		for i := range warnings {
			warnings[i] = fileOf(cfgs[0]) + ": " + warnings[i]
		}
	}
	return set, warnings, nil
}

func fileOf(cfg *config.Config) string {
	if cfg.Source == nil {
		return ""
	}
	return cfg.Source.File
}

// fileError prefixes each line of a compile error (which names the rule)
// with the file.
func fileError(path string, err error) error {
	if path == "" {
		return err
	}
	var lines []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			lines = append(lines, fmt.Errorf("%s: %w", path, e))
		}
		return errors.Join(lines...)
	}
	return fmt.Errorf("%s: %w", path, err)
}

// Strict returns a strict function for Load: true for every file when all
// is set, else only for the file named changed.
func Strict(all bool, changed string) func(string) bool {
	return func(p string) bool { return all || p == changed }
}
