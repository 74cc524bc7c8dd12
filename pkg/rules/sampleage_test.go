package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/promscaler/promscaler/internal/kubemapper"
	"github.com/promscaler/promscaler/pkg/config"
)

// A rule's or externalQueries entry's maxSampleAge is carried by each query
// it renders; without the key it is 0 (the backend's).
func TestQueriesCarryMaxSampleAge(t *testing.T) {
	cfg, err := config.Parse([]byte(`rules:
- seriesQuery: 'a{namespace!="",pod!=""}'
  resources: {template: <<.Resource>>}
  maxSampleAge: 30s
externalRules:
- seriesQuery: 'c'
  resources: {namespaced: false}
  maxSampleAge: 2m
externalQueries:
- {name: d, query: vector(1)}
- {name: e, query: vector(1), maxSampleAge: 90s}
`), "r.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Compile(cfg, kubemapper.New())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]time.Duration{}
	custom, err := rs.Rules()[0].QueryForSeries(CustomRequest{Series: "a", Resource: schema.GroupResource{Resource: "pods"}, Namespace: "ns", Names: []string{"p"}})
	if err != nil {
		t.Fatal(err)
	}
	got["rules[0]"] = custom.MaxSampleAge
	shared, err := rs.Rules()[0].SharedQuery(SharedRequest{Series: "a", Resource: schema.GroupResource{Resource: "pods"}})
	if err != nil {
		t.Fatal(err)
	}
	got["rules[0] shared"] = shared.MaxSampleAge
	ext, err := rs.Rules()[1].QueryForExternalSeries(ExternalRequest{Series: "c"})
	if err != nil {
		t.Fatal(err)
	}
	got["externalRules[0]"] = ext.MaxSampleAge
	for _, q := range rs.ExternalQueries() {
		r, err := q.Query(ExternalRequest{})
		if err != nil {
			t.Fatal(err)
		}
		got[q.Path()] = r.MaxSampleAge
	}
	want := map[string]time.Duration{"rules[0]": 30 * time.Second, "rules[0] shared": 30 * time.Second, "externalRules[0]": 2 * time.Minute,
		"externalQueries[0]": 0, "externalQueries[1]": 90 * time.Second}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("max sample ages (-want +got):\n%s", d)
	}
}

// A maxSampleAge that is not a positive duration is refused at its key.
func TestMaxSampleAgeRefused(t *testing.T) {
	for _, v := range []string{"soon", "0s", "-1m"} {
		cfg, err := config.Parse([]byte("externalQueries:\n- {name: e, query: vector(1), maxSampleAge: \""+v+"\"}\n"), "r.yaml")
		if err == nil {
			if errs := cfg.Validate(); len(errs) > 0 {
				err = errs.Err()
			}
		}
		if err == nil {
			_, err = Compile(cfg, kubemapper.New())
		}
		if err == nil || !strings.Contains(err.Error(), "maxSampleAge") {
			t.Errorf("maxSampleAge %q: error %v, want one naming maxSampleAge", v, err)
		}
	}
}
