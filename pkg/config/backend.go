package config

import (
	"slices"
	"strings"

	"github.com/promscaler/promscaler/internal/truncate"
)

// DefaultBackend is the name of the backend the --prometheus-* flags
// define; a rule without a backend key uses it.
const DefaultBackend = "default"

// BackendOrDefault returns the backend a rule's (or an externalQueries
// entry's, or resourceRules') backend key names: the key, or
// DefaultBackend when it is not set.
func BackendOrDefault(key string) string {
	if key == "" {
		return DefaultBackend
	}
	return key
}

// UnknownBackends returns an error for every rule, externalQueries entry
// and resourceRules whose backend key names a backend that is not in
// known (the default backend is always known), at the key's position.
func (c *Config) UnknownBackends(known []string) ErrorList {
	if c == nil {
		return nil
	}
	ch := &checker{c: c}
	check := func(path, name string) {
		if name == "" || name == DefaultBackend || slices.Contains(known, name) {
			return
		}
		names := append([]string{DefaultBackend}, known...)
		ch.errorf(KeyPath(path, "backend"), "define it in --backends-config, or remove the key to use the --prometheus-* flags' backend",
			"unknown backend %q (defined: %s)", truncate.String(name, 80), strings.Join(names, ", "))
	}
	for i := range c.Rules {
		check(IndexPath(PathRules, i), c.Rules[i].Backend)
	}
	for i := range c.ExternalRules {
		check(IndexPath(PathExternalRules, i), c.ExternalRules[i].Backend)
	}
	for i := range c.ExternalQueries {
		check(IndexPath(PathExternalQueries, i), c.ExternalQueries[i].Backend)
	}
	if c.ResourceRules != nil {
		check(PathResourceRules, c.ResourceRules.Backend)
	}
	sortList(ch.errs)
	return ch.errs
}
