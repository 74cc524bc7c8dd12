package app

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/promscaler/promscaler/pkg/config"
	"github.com/promscaler/promscaler/pkg/teamrules"
)

// checkTeamConfigMaps checks the team rules ConfigMaps in the manifests at
// paths (YAML, one or more documents each) as the adapter's --team-rules
// loads them: strictly, confined to their namespace with namespaceLabel,
// their backend keys naming the default backend or one of backends. It
// prints a line per ConfigMap that loads and every problem, and returns
// the number of warnings printed and false when one is an error.
func checkTeamConfigMaps(paths []string, mapper meta.RESTMapper, namespaceLabel string, backends []string, t toolIO) (int, bool) {
	warnings, ok := 0, true
	for _, path := range paths {
		cms, err := readConfigMaps(path)
		if err != nil {
			t.errorf("--team-configmap %v", err)
			ok = false
			continue
		}
		for _, cm := range cms {
			where := fmt.Sprintf("%s: ConfigMap %s/%s", path, cm.Namespace, cm.Name)
			if cm.Labels[teamrules.Label] != "true" {
				t.errorf("warning: %s: no label %s: the adapter does not read it", where, teamrules.Selector)
				warnings++
			}
			rs, warns, err := teamrules.Load(cm, mapper, namespaceLabel, backends)
			if err != nil {
				for _, line := range strings.Split(err.Error(), "\n") {
					t.errorf("%s", line)
				}
				ok = false
				continue
			}
			for _, w := range warns {
				t.errorf("warning: %s", w)
				warnings++
			}
			fmt.Fprintf(t.stdout, "%s: ok: %d custom and %d external rules serve namespace %s\n",
				where, len(rs.CustomRules()), len(rs.ExternalRules()), cm.Namespace)
		}
	}
	return warnings, ok
}

// readConfigMaps reads the ConfigMaps of a manifest file. A document that
// is not a ConfigMap, or has no namespace (team rules serve their
// ConfigMap's namespace), is an error naming it.
func readConfigMaps(path string) ([]*corev1.ConfigMap, error) {
	data, err := config.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*corev1.ConfigMap
	for doc := 1; ; doc++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		cm := &corev1.ConfigMap{}
		if err := yaml.Unmarshal(raw, cm); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
		if cm.Kind == "" && cm.APIVersion == "" && cm.Name == "" {
			continue // comments only
		}
		if cm.Kind != "ConfigMap" {
			return nil, fmt.Errorf("%s: document %d: kind %q, want ConfigMap", path, doc, cm.Kind)
		}
		if cm.Namespace == "" {
			return nil, fmt.Errorf("%s: document %d: ConfigMap %q has no metadata.namespace: team rules serve their ConfigMap's namespace", path, doc, cm.Name)
		}
		out = append(out, cm)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no ConfigMap", path)
	}
	return out, nil
}
