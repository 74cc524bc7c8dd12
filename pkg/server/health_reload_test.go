package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/reload"
	"github.com/promscaler/promscaler/test/promtest"
)

// TestReadinessDetailsFollowBackendsReload: the readiness details read the
// backends in service on every call, so a backend a backends-file reload
// adds is reported when it is down, and one the reload removes is no
// longer; a backends file rejected on reload is a line as a rules file is.
func TestReadinessDetailsFollowBackendsReload(t *testing.T) {
	up := promtest.New(nil)
	defer up.Close()
	up.HandleQuery(func(string) (int, string) {
		return http.StatusOK, `{"status":"success","data":{"resultType":"vector","result":[]}}`
	})
	down := promtest.New(nil)
	downURL := down.URL
	down.Close() // connections refused from now on

	set, err := promclient.NewBackends([]promclient.Backend{{URL: up.URL, Timeout: time.Second}}, metrics.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var rejections []reload.Rejection
	details := readinessDetails(set.Guards, nil, func() []reload.Rejection { return rejections })
	if got := details(); len(got) != 0 {
		t.Fatalf("details with every backend up: %q", got)
	}

	if _, _, _, err := set.Reload([]promclient.Backend{{Name: "added", URL: downURL, Timeout: time.Second}}); err != nil {
		t.Fatal(err)
	}
	added, ok := set.Lookup("added")
	if !ok {
		t.Fatal("the added backend is not looked up")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range promclient.DefaultBreakerFailures + 1 {
		if _, err := added.QuerySamples(ctx, "up", time.Time{}); err == nil {
			t.Fatal("a query to a closed port succeeded")
		}
	}
	got := details()
	if len(got) != 1 || !strings.HasPrefix(got[0], `prometheus backend "added": down since`) {
		t.Errorf("details with the added backend down = %q, want its line", got)
	}

	if _, _, _, err := set.Reload(nil); err != nil {
		t.Fatal(err)
	}
	since := time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)
	rejections = []reload.Rejection{{File: "/etc/adapter/backends.yaml", Since: since, Err: "backends.yaml:3:8: backends[0].url: bad"}}
	want := []string{"configuration file /etc/adapter/backends.yaml: not in service since 2026-12-04T18:00:00Z (the previous version serves): backends.yaml:3:8: backends[0].url: bad"}
	if d := cmp.Diff(want, details()); d != "" {
		t.Errorf("details after the removing reload and a rejected backends file (-want +got):\n%s", d)
	}
}
