//go:build e2e && chaos

package chaos

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/promscaler/promscaler/pkg/reload"
	"github.com/promscaler/promscaler/test/e2e/framework"
)

// adapterPodName is the Pod the fault suite's adapter believes it runs in
// (POD_NAMESPACE and POD_NAME, as the shipped deployment sets them from the
// downward API), so that it records its Events on it: there is no kubelet
// and no such Pod, but an Event only names the object it is about.
const adapterPodName = "promscaler-adapter-chaos"

// setAdapterPod has the adapters t starts record their Events on
// adapterPodName in the adapter's namespace.
func setAdapterPod(t *testing.T) {
	t.Setenv("POD_NAMESPACE", framework.AdapterNamespace)
	t.Setenv("POD_NAME", adapterPodName)
}

// checkRulesEmptied checks the three signs issue 32 (item 5) asks of a
// refused reload that would have removed every rule: the adapter's log
// names it, promscaler_config_rules_emptied_total{outcome="refused"} counts
// it (and nothing was applied), and a RulesEmptied Event is recorded on the
// adapter's Pod. It returns the problems found and a note for the table.
func (s *stack) checkRulesEmptied(ctx context.Context) (problems []string, note string) {
	want := reload.ErrRulesEmptied.Error()
	if log, err := os.ReadFile(s.adapter.Process.LogFile); err != nil {
		problems = append(problems, fmt.Sprintf("reading the adapter's log: %v", err))
	} else if !strings.Contains(string(log), want) {
		problems = append(problems, fmt.Sprintf("the adapter's log does not mention %q", want))
	}
	refused, applied := s.emptiedCounts(ctx)
	if refused < 1 || applied > 0 {
		problems = append(problems, fmt.Sprintf(`promscaler_config_rules_emptied_total: refused %v, applied %v; want refused at least 1, applied 0`, refused, applied))
	}
	ev, err := s.waitAdapterEvent(ctx, "RulesEmptied", 15*time.Second)
	if err != nil {
		problems = append(problems, err.Error())
	}
	return problems, fmt.Sprintf("RulesEmptied Event on the adapter's Pod: `%.160s`", ev)
}

// emptiedCounts reads promscaler_config_rules_emptied_total by outcome from
// the adapter's /metrics (-1 when it cannot be read).
func (s *stack) emptiedCounts(ctx context.Context) (refused, applied float64) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	body, _, err := framework.Get(ctx, s.direct, s.adapter.URL+"/metrics")
	if err != nil {
		return -1, -1
	}
	for _, line := range strings.Split(string(body), "\n") {
		rest, ok := strings.CutPrefix(line, "promscaler_config_rules_emptied_total{")
		if !ok {
			continue
		}
		labels, value, _ := strings.Cut(rest, "} ")
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		switch {
		case strings.Contains(labels, `outcome="refused"`):
			refused = v
		case strings.Contains(labels, `outcome="applied"`):
			applied = v
		}
	}
	return refused, applied
}

// waitAdapterEvent waits for an Event of reason on adapterPodName and
// returns its note.
func (s *stack) waitAdapterEvent(ctx context.Context, reason string, timeout time.Duration) (string, error) {
	var lastErr error
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		list, err := s.env.Client.EventsV1().Events(framework.AdapterNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			lastErr = err
			continue
		}
		for _, e := range list.Items {
			if e.Reason == reason && e.Regarding.Kind == "Pod" && e.Regarding.Name == adapterPodName {
				return e.Note, nil
			}
		}
	}
	return "", fmt.Errorf("no %s Event on Pod %s/%s within %v (last list error: %v)", reason, framework.AdapterNamespace, adapterPodName, timeout, lastErr)
}
