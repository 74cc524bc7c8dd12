package kedaconvert

import (
	"bytes"
	"fmt"
	"io"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/runtime"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/promscaler/promscaler/pkg/config"
)

// WriteQueries writes the externalQueries entries as an adapter config
// file (docs/config.md); nothing when there are none.
func WriteQueries(w io.Writer, r Result) error {
	if len(r.Queries) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("# The adapter's externalQueries entries (docs/config.md#externalqueries-promscaler).\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(struct {
		ExternalQueries []config.ExternalQuery `yaml:"externalQueries"`
	}{r.Queries}); err != nil {
		return fmt.Errorf("encoding externalQueries: %w", err)
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

// WriteHPAs writes the HPAs as a multi-document YAML stream, without
// status or empty metadata.
func WriteHPAs(w io.Writer, r Result) error {
	var b bytes.Buffer
	for i, hpa := range r.HPAs {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(hpa)
		if err != nil {
			return fmt.Errorf("HPA %s: %w", hpa.Name, err)
		}
		delete(u, "status")
		if md, ok := u["metadata"].(map[string]any); ok {
			delete(md, "creationTimestamp")
		}
		out, err := sigsyaml.Marshal(u)
		if err != nil {
			return fmt.Errorf("HPA %s: %w", hpa.Name, err)
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(out)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// Write writes the externalQueries document, then the HPAs, as one YAML
// stream (what `autoscaler convert-keda` prints without --queries-out).
func Write(w io.Writer, r Result) error {
	if err := WriteQueries(w, r); err != nil {
		return err
	}
	if len(r.Queries) > 0 && len(r.HPAs) > 0 {
		if _, err := io.WriteString(w, "---\n"); err != nil {
			return err
		}
	}
	return WriteHPAs(w, r)
}
