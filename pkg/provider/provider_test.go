package provider_test

import (
	"strings"
	"testing"

	"github.com/promscaler/promscaler/pkg/provider"
)

func TestNewReportsEveryMissingDependency(t *testing.T) {
	_, err := provider.New(provider.Config{MaxNamesInQuery: -1, MaxQueryBytes: -1})
	if err == nil {
		t.Fatal("New with an empty config succeeded")
	}
	for _, want := range []string{"no index source", "no Prometheus querier", "no object lister", "no RESTMapper", "MaxNamesInQuery -1", "MaxQueryBytes -1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}
