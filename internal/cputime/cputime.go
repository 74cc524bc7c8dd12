// Package cputime reads how much CPU the current process has used, for
// benchmarks that report CPU per operation beside wall time: on a shared,
// loaded machine wall time mostly measures waiting for a core.
package cputime
