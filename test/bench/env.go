package bench

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// envInt, envInts and envDuration read a size or option of the harness:
// unset (or empty) is def; a value that is not a positive number stops the
// run with a message naming the variable, rather than measuring something
// else than was asked for.
func envInt(name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || v <= 0 {
		badEnv(name, s, "a positive whole number")
	}
	return v
}

func envInts(name string, def []int) []int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v <= 0 {
			badEnv(name, s, "a comma-separated list of positive whole numbers")
		}
		out = append(out, v)
	}
	return out
}

func envDuration(name string, def time.Duration) time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || v <= 0 {
		badEnv(name, s, `a positive duration such as "15s"`)
	}
	return v
}

// badEnv stops the benchmark binary: a setting it cannot read.
func badEnv(name, value, want string) {
	fmt.Fprintf(os.Stderr, "bench: %s=%q: want %s\n", name, value, want)
	os.Exit(2)
}

// envChoices reads a comma-separated list of words, each one of allowed;
// unset (or empty) is def.
func envChoices(name string, def []string, allowed ...string) []string {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(allowed, f) {
			badEnv(name, s, "a comma-separated list of "+strings.Join(allowed, ", "))
		}
		out = append(out, f)
	}
	return out
}

// envChoice reads one word of allowed; unset (or empty) is def.
func envChoice(name, def string, allowed ...string) string {
	s := strings.TrimSpace(os.Getenv(name))
	if s == "" {
		return def
	}
	if !slices.Contains(allowed, s) {
		badEnv(name, s, "one of "+strings.Join(allowed, ", "))
	}
	return s
}
