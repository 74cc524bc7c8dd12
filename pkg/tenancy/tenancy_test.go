package tenancy

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// TestConfine tries to read namespace b from a rule confined to namespace
// a, whatever the text.
func TestConfine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		query   string
		want    string
		wantErr bool // ErrNotConfinable
	}{
		{name: "bare metric", query: `up`, want: `up{namespace="a"}`},
		{name: "rendered rule query keeps its matcher", query: `sum(rate(http_requests_total{namespace="a",pod=~"p1|p2"}[2m])) by (pod)`,
			want: `sum by (pod) (rate(http_requests_total{namespace="a",pod=~"p1|p2"}[2m]))`},
		{name: "another metric via or", query: `x{namespace="a"} or kube_pod_info`, want: `x{namespace="a"} or kube_pod_info{namespace="a"}`},
		{name: "on() join with another metric", query: `x{namespace="a"} * on() group_left() secret_total`,
			want: `x{namespace="a"} * on () group_left () secret_total{namespace="a"}`},
		{name: "ignoring namespace in a join", query: `x * ignoring(namespace) y`, want: `x{namespace="a"} * ignoring (namespace) y{namespace="a"}`},
		{name: "subquery", query: `max_over_time(rate(y[1m])[10m:1m])`, want: `max_over_time(rate(y{namespace="a"}[1m])[10m:1m])`},
		{name: "offset and @", query: `z offset 1h + z @ 1700000000`, want: `z{namespace="a"} offset 1h + z{namespace="a"} @ 1700000000.000`},
		{name: "name matcher only", query: `{__name__=~".+"}`, want: `{__name__=~".+",namespace="a"}`},
		{name: "quoted name, UTF-8 style", query: `{"up"}`, want: `{__name__="up",namespace="a"}`},
		{name: "matcher text in a string literal", query: `label_replace(up, "x", "namespace=\"b\"", "", "")`,
			want: `label_replace(up{namespace="a"}, "x", "namespace=\"b\"", "", "")`},
		{name: "comment", query: "up # {namespace=\"b\"}", want: `up{namespace="a"}`},
		{name: "absent", query: `absent(nothing)`, want: `absent(nothing{namespace="a"})`},
		{name: "scalar only", query: `vector(1)`, want: `vector(1)`},
		{name: "other namespace", query: `up{namespace="b"}`, wantErr: true},
		{name: "other namespace on the second side", query: `up or up{namespace="b"}`, wantErr: true},
		{name: "other namespace in a subquery", query: `max_over_time(up{namespace="b"}[5m:])`, wantErr: true},
		{name: "both namespaces", query: `up{namespace="a",namespace="b"}`, wantErr: true},
		{name: "regex on the namespace", query: `up{namespace=~"a|b"}`, wantErr: true},
		{name: "regex that matches only a", query: `up{namespace=~"a"}`, wantErr: true},
		{name: "negative regex", query: `up{namespace!~"a"}`, wantErr: true},
		{name: "excludes its own namespace", query: `up{namespace!="a"}`, wantErr: true},
		{name: "excludes another namespace: narrowed", query: `up{namespace!=""}`, want: `up{namespace!="",namespace="a"}`},
	}
	e, err := New(DefaultLabel, "a")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := e.Confine(tc.query)
			if tc.wantErr {
				if !errors.Is(err, ErrNotConfinable) {
					t.Fatalf("Confine(%q) = %q, %v; want ErrNotConfinable", tc.query, got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Confine(%q): %v", tc.query, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Confine(%q) (-want +got):\n%s", tc.query, diff)
			}
			checkConfined(t, got, DefaultLabel, "a")
		})
	}
}

func TestConfineOtherLabel(t *testing.T) {
	t.Parallel()
	e, err := New("kubernetes_namespace", "team-a")
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Confine(`sum(up{namespace="b"})`)
	if err != nil {
		t.Fatal(err)
	}
	if want := `sum(up{kubernetes_namespace="team-a",namespace="b"})`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestConfineRejectsBadInput(t *testing.T) {
	t.Parallel()
	e, err := New(DefaultLabel, "a")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`sum(`, `info(up)`, ``} {
		if got, err := e.Confine(q); err == nil {
			t.Errorf("Confine(%q) = %q, want a parse error", q, got)
		} else if errors.Is(err, ErrNotConfinable) {
			t.Errorf("Confine(%q): parse error reported as ErrNotConfinable: %v", q, err)
		}
	}
	for _, tc := range []struct{ label, ns string }{{"", "a"}, {"__name__", "a"}, {"name-space", "a"}, {"namespace", ""}} {
		if _, err := New(tc.label, tc.ns); err == nil {
			t.Errorf("New(%q, %q) accepted", tc.label, tc.ns)
		}
	}
}

// checkConfined parses q and fails unless every selector of it has
// label="ns" and no other matcher on label that could select elsewhere.
func checkConfined(t testing.TB, q, label, ns string) {
	t.Helper()
	expr, err := promql.ParseExpr(q)
	if err != nil {
		t.Fatalf("confined query %q does not parse: %v", q, err)
	}
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		has := false
		for _, m := range vs.LabelMatchers {
			if m.Name != label {
				continue
			}
			if m.Type == labels.MatchEqual && m.Value == ns {
				has = true
			} else if m.Type != labels.MatchNotEqual {
				t.Errorf("selector %s of %q has matcher %s", vs, q, m)
			}
		}
		if !has {
			t.Errorf("selector %s of %q lacks %s=%q", vs, q, label, ns)
		}
		return nil
	})
}

// FuzzConfine: whatever the query, Confine's output parses, every selector
// in it carries the namespace matcher, and confining it again changes
// nothing.
func FuzzConfine(f *testing.F) {
	for _, s := range []string{
		`up`, `x or on() y`, `max_over_time(rate(y[1m])[10m:1m] offset 5m)`, `up{namespace="b"}`,
		`label_replace(up, "namespace", "b", "", "")`, `{__name__=~"a.*",namespace!=""} unless z`,
		`sum by (namespace) (a) / ignoring(x) group_left b @ end()`, `histogram_quantile(0.9, rate(h_bucket[5m]))`,
	} {
		f.Add(s, "a")
	}
	f.Fuzz(func(t *testing.T, q, ns string) {
		e, err := New(DefaultLabel, ns)
		if err != nil {
			return
		}
		out, err := e.Confine(q)
		if err != nil {
			return
		}
		checkConfined(t, out, DefaultLabel, ns)
		again, err := e.Confine(out)
		if err != nil {
			t.Fatalf("Confine(Confine(%q)) = %v", q, err)
		}
		if again != out {
			t.Errorf("Confine is not idempotent on %q: %q then %q", q, out, again)
		}
	})
}
