package config

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ListFiles expands the configuration sources given to --config (each a
// file or a directory) into the files to read, in order: a file stands for
// itself, a directory for every *.yaml file directly in it, sorted by name
// (hidden entries, such as a ConfigMap volume's ..data, are skipped). A
// file named twice is listed once, at its first place. A source that does
// not exist is an error naming it.
func ListFiles(sources []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, src := range sources {
		fi, err := os.Stat(src)
		if err != nil {
			return nil, fmt.Errorf("configuration source %s: %w", src, err)
		}
		if !fi.IsDir() {
			add(src)
			continue
		}
		entries, err := os.ReadDir(src)
		if err != nil {
			return nil, fmt.Errorf("configuration directory %s: %w", src, err)
		}
		var names []string
		for _, e := range entries {
			n := e.Name()
			if strings.HasPrefix(n, ".") || !strings.HasSuffix(n, ".yaml") {
				continue
			}
			// Follow symlinks (ConfigMap volumes link each key into ..data):
			// only regular files count.
			if st, err := os.Stat(filepath.Join(src, n)); err != nil || !st.Mode().IsRegular() {
				continue
			}
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			add(filepath.Join(src, n))
		}
	}
	return out, nil
}

// ReadFile reads a configuration file, refusing one larger than the bound
// Load applies.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading configuration: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading configuration %s: %w", path, err)
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("reading configuration %s: larger than %d bytes", path, maxFileSize)
	}
	return data, nil
}
