package kedaconvert

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/promscaler/promscaler/pkg/config"
	"github.com/promscaler/promscaler/pkg/scaletozero"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// backends maps one documented serverAddress to a backend, so the goldens
// show both a mapped and an unmapped address.
var backends = map[string]string{"https://mimir.example.com/prometheus": "mimir"}

// render is what `autoscaler convert-keda` prints for a file: the
// externalQueries, the HPAs, then the notes (on stderr there).
func render(t *testing.T, file string) []byte {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	docs, notes, err := Read(filepath.Base(file), data)
	if err != nil {
		t.Fatal(err)
	}
	r := Convert(docs, Options{Backends: backends})
	r.Notes = append(notes, r.Notes...)
	var b bytes.Buffer
	if err := Write(&b, r); err != nil {
		t.Fatal(err)
	}
	b.WriteString("# notes:\n")
	for _, n := range r.Notes {
		b.WriteString("# " + n.String() + "\n")
	}
	return b.Bytes()
}

// TestGolden converts KEDA's documented Prometheus-trigger shapes
// (testdata/*.yaml) and compares with testdata/*.golden.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no inputs: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			got := render(t, f)
			golden := strings.TrimSuffix(f, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./pkg/kedaconvert -update)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"not yaml", "a: [", "in.yaml: document 1: yaml: line 1: did not find expected node content"},
		{"unknown field", "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nspec:\n  minReplicas: 1\n", `in.yaml:1: ScaledObject: error unmarshaling JSON: while decoding JSON: json: unknown field "minReplicas"`},
		{"wrong type", "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nspec:\n  minReplicaCount: one\n", `in.yaml:1: ScaledObject: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal string into Go struct field ScaledObjectSpec.spec.minReplicaCount of type int32`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Read("in.yaml", []byte(tt.in))
			if err == nil || err.Error() != tt.want {
				t.Errorf("error %v, want %s", err, tt.want)
			}
		})
	}
}

func TestFormulaToPromQL(t *testing.T) {
	terms := map[string]string{"a": "A", "b": "B"}
	tests := []struct {
		formula, want, err string
	}{
		{formula: "a + b", want: "A + B"},
		{formula: "(a + 2*b) / 3", want: "(A + 2 * B) / 3"},
		{formula: "-a % 4", want: "-A % 4"},
		{formula: "ceil(a / 2.5)", want: "ceil(A / 2.5)"},
		{formula: "a > 1 ? a : b", err: `formula "a > 1 ? a : b": conditionals and ** have no PromQL equivalent here`},
		{formula: "a ** 2", err: `formula "a ** 2": conditionals and ** have no PromQL equivalent here`},
		{formula: "a ^ 2", err: `formula "a ^ 2": operator ^: not converted`},
		{formula: "a == b", err: `formula "a == b": operator ==: not converted`},
		{formula: "max(a, b)", err: `formula "max(a, b)": function call: only abs, ceil, floor and round of one argument are converted`},
		{formula: "c + 1", err: `formula "c + 1": no named prometheus trigger "c"`},
		{formula: "3", err: `formula "3": uses no trigger`},
		{formula: "abs(3) + a", err: `formula "abs(3) + a": abs of a constant: not converted`},
		{formula: `"x"`, err: `formula "\"x\"": "x": not a number`},
		{formula: "a +", err: `formula "a +": only arithmetic on trigger names is converted: 1:4: expected operand, found 'EOF'`},
	}
	for _, tt := range tests {
		t.Run(tt.formula, func(t *testing.T) {
			got, err := FormulaToPromQL(tt.formula, terms)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if got != tt.want || gotErr != tt.err {
				t.Errorf("got %q, %q; want %q, %q", got, gotErr, tt.want, tt.err)
			}
		})
	}
}

// FuzzRead: any input gives ScaledObjects and notes or an error, never a
// panic, and converting what was read never panics either.
func FuzzRead(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nspec:\n  triggers: [{type: prometheus, metadata: {query: 'x', threshold: '1e400'}}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, _, err := Read("fuzz.yaml", data)
		if err != nil {
			return
		}
		r := Convert(docs, Options{})
		var b bytes.Buffer
		if err := Write(&b, r); err != nil {
			t.Fatalf("writing the result of %q: %v", data, err)
		}
	})
}

// FuzzFormula: any formula translates or errors, never panics.
func FuzzFormula(f *testing.F) {
	for _, s := range []string{"a + b", "(a*2)/b", "abs(a)", "a ? b : c", "-(-a)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = FormulaToPromQL(s, map[string]string{"a": "A", "b": "B"})
	})
}

// TestOutputsLoad: the externalQueries written for every golden input are
// a config file the adapter loads (config.Parse validates each entry and
// its PromQL), and the HPAs pass promscaler's own annotation parser.
func TestOutputsLoad(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			docs, _, err := Read(f, data)
			if err != nil {
				t.Fatal(err)
			}
			r := Convert(docs, Options{Backends: backends})
			var b bytes.Buffer
			if err := WriteQueries(&b, r); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Parse(b.Bytes(), "converted.yaml")
			if err != nil {
				t.Fatalf("the adapter refuses the converted queries: %v\n%s", err, b.String())
			}
			if qe := cfg.QueryErrors(); len(qe) > 0 {
				t.Errorf("queries Prometheus would reject: %v", qe)
			}
			if len(cfg.ExternalQueries) != len(r.Queries) {
				t.Errorf("loaded %d entries, wrote %d", len(cfg.ExternalQueries), len(r.Queries))
			}
			for _, hpa := range r.HPAs {
				if _, problems := scaletozero.Parse(hpa); len(problems) > 0 {
					t.Errorf("HPA %s: %v", hpa.Name, scaletozero.Messages(problems))
				}
			}
		})
	}
}
