package rules

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/promscaler/promscaler/pkg/config"
	"github.com/promscaler/promscaler/pkg/tenancy"
)

// File is one rules file and its content.
type File struct {
	Path string
	Data []byte
}

// Read lists the files of sources (config.ListFiles: files and directories
// of *.yaml files, as given to --config) and reads them.
func Read(sources []string) ([]File, error) {
	paths, err := config.ListFiles(sources)
	if err != nil {
		return nil, err
	}
	out := make([]File, 0, len(paths))
	for _, p := range paths {
		data, err := config.ReadFile(p)
		if err != nil {
			return nil, err
		}
		out = append(out, File{Path: p, Data: data})
	}
	return out, nil
}

// Options say how Load checks and compiles what it reads.
type Options struct {
	// Mapper resolves the rules' resources. Required.
	Mapper meta.RESTMapper
	// Strict names the files in which a query Prometheus would reject
	// (config.Config.QueryErrors) is an error; in the others it is loaded
	// anyway and reported in Loaded.QueryErrors. Nil: no file. The adapter
	// is lenient at startup (as prometheus-adapter; strict with --strict)
	// and strict for the file that changed on reload: see Strict.
	Strict func(path string) bool
	// Backends are the named backends a rule's backend key may name
	// besides the default one; another name is an error at its place.
	Backends []string
	// AnyBackend skips that check (check-config without the backends
	// file, which reports such keys itself).
	AnyBackend bool
	// Confine, when set, confines every rule to one namespace (team
	// rules): a rule whose queries cannot be confined is an error.
	Confine *tenancy.Enforcer
}

// Loaded is a loaded rules configuration: every file parsed, and the rules
// of all of them compiled into one set.
type Loaded struct {
	// Configs are the parsed files, in source order.
	Configs []*config.Config
	// Set is every file's rules, merged (Merge), confined when asked.
	Set *RuleSet
	// Warnings are the files' warnings and the compile warnings, each
	// naming its file.
	Warnings []string
	// QueryErrors are the queries Prometheus would reject in the files
	// that were not strict: loaded anyway (their requests will fail), each
	// naming its file, line and rule.
	QueryErrors []error
}

// Load is the one way a rules configuration is loaded, by the server at
// startup and on reload, by team rules and by the offline tools: it parses
// every file, checks the backend keys, compiles each file against the
// mapper, merges them in order and, for team rules, confines the result.
// Every problem of every file is in the error, each naming its file, line
// and rule.
func Load(files []File, opts Options) (*Loaded, error) {
	out := &Loaded{}
	var errs, unknown []error
	for _, f := range files {
		cfg, err := config.Parse(f.Data, f.Path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, w := range cfg.Warnings() {
			out.Warnings = append(out.Warnings, w.Error())
		}
		if qerrs := cfg.QueryErrors(); len(qerrs) > 0 {
			if opts.Strict != nil && opts.Strict(f.Path) {
				errs = append(errs, qerrs)
				continue
			}
			for _, e := range qerrs {
				out.QueryErrors = append(out.QueryErrors, e)
			}
		}
		if !opts.AnyBackend {
			for _, u := range cfg.UnknownBackends(opts.Backends) {
				unknown = append(unknown, u)
			}
		}
		out.Configs = append(out.Configs, cfg)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	set, warnings, err := compile(out.Configs, opts.Mapper)
	if err != nil {
		return nil, errors.Join(append(unknown, err)...)
	}
	out.Warnings = append(out.Warnings, warnings...)
	if opts.Confine != nil {
		if set, err = set.ConfineTo(opts.Confine); err != nil {
			if len(files) == 1 {
				err = fmt.Errorf("%s: %w", files[0].Path, err)
			}
			unknown = append(unknown, err)
		}
	}
	if err := errors.Join(unknown...); err != nil {
		return nil, err
	}
	out.Set = set
	return out, nil
}

// compile compiles each configuration against mapper and merges them, in
// order (Merge). Errors and warnings name their file.
func compile(cfgs []*config.Config, mapper meta.RESTMapper) (*RuleSet, []string, error) {
	sets := make([]*RuleSet, 0, len(cfgs))
	var errs []error
	for _, cfg := range cfgs {
		rs, err := Compile(cfg, mapper)
		if err != nil {
			errs = append(errs, fileError(fileOf(cfg), err))
			continue
		}
		sets = append(sets, rs)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	set, err := Merge(sets)
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

// Strict returns an Options.Strict function: true for every file when all
// is set, else only for the file named changed.
func Strict(all bool, changed string) func(string) bool {
	return func(p string) bool { return all || p == changed }
}
