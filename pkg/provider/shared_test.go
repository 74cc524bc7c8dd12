package provider_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/promscaler/promscaler/pkg/provider"
	"github.com/promscaler/promscaler/pkg/provider/fake"
)

// sharedWorld is a cluster of namespaces ns0..ns<n-1> with pods p-0..p-2
// each, and a fake Prometheus answering the seed rule's queries from one
// table: the shared query (grouped by namespace and pod_name) with every
// object of the table, a per-request query with the objects of its
// namespace, plus late objects only per-request queries see (series that
// appeared after a shared evaluation).
type sharedWorld struct {
	mu     sync.Mutex
	values map[string]map[string]string // namespace -> pod -> value
	late   map[string]map[string]string
	objs   *fake.Objects
	nss    []string // ns0..ns<n-1>
}

var nsMatcher = regexp.MustCompile(`namespace="([^"]+)"`)

func newSharedWorld(n int) *sharedWorld {
	w := &sharedWorld{values: map[string]map[string]string{}, late: map[string]map[string]string{}, objs: fake.NewObjects()}
	for i := range n {
		ns := fmt.Sprintf("ns%d", i)
		w.nss = append(w.nss, ns)
		w.values[ns] = map[string]string{}
		for j := range 3 {
			pod := fmt.Sprintf("p-%d", j)
			w.values[ns][pod] = fmt.Sprintf("%d.%d", i, j)
			w.objs.Add(podsGR, fake.Object{Namespace: ns, Name: pod, Labels: map[string]string{"app": "web"}})
		}
		w.objs.Add(podsGR, fake.Object{Namespace: ns, Name: "p-new", Labels: map[string]string{"app": "web"}})
	}
	return w
}

// env is a provider over the world's objects, discovery having found the
// seed rule's series in each of its namespaces, answered by w.answer
// unless o.answer is set.
func (w *sharedWorld) env(t *testing.T, o envOptions) *env {
	t.Helper()
	if o.answer == nil {
		o.answer = w.answer
	}
	o.objects, o.fpmNamespaces = w.objs, w.nss
	return newEnv(t, o)
}

// update runs change under the world's lock.
func (w *sharedWorld) update(change func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	change()
}

// wantValues is what namespace ns<i> answers, as newSharedWorld fills it.
func wantValues(i int) []string {
	if i == 0 {
		return []string{"p-0=0", "p-1=100m", "p-2=200m"}
	}
	return []string{fmt.Sprintf("p-0=%d", i), fmt.Sprintf("p-1=%d100m", i), fmt.Sprintf("p-2=%d200m", i)}
}

func (w *sharedWorld) answer(q string) (int, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []sample
	add := func(ns string, pods map[string]string) {
		for pod, v := range pods {
			out = append(out, sample{map[string]string{"namespace": ns, "pod_name": pod}, v, 1764493200})
		}
	}
	if strings.Contains(q, "by (namespace,pod_name)") {
		for ns, pods := range w.values {
			add(ns, pods)
		}
		return http.StatusOK, vector(out...)
	}
	m := nsMatcher.FindStringSubmatch(q)
	if m == nil {
		return http.StatusBadRequest, `{"status":"error","errorType":"bad_data","error":"unexpected query"}`
	}
	add(m[1], w.values[m[1]])
	add(m[1], w.late[m[1]])
	return http.StatusOK, vector(out...)
}

// values returns what GetMetricBySelector answers for namespace: pod=value.
func values(t *testing.T, e *env, namespace string) []string {
	t.Helper()
	list, err := e.prov.GetMetricBySelector(context.Background(), namespace, mustSelector(t, "app=web"), fpmInfo, labels.Everything())
	if err != nil {
		t.Fatalf("GetMetricBySelector(%s): %v", namespace, err)
	}
	return pairs(list.Items)
}

func pairs(items []custom_metrics.MetricValue) []string {
	var out []string
	for _, v := range items {
		out = append(out, v.DescribedObject.Name+"="+v.Value.String())
	}
	return out
}

func countShared(queries []string) (shared, perRequest int) {
	for _, q := range queries {
		if strings.Contains(q, "by (namespace,pod_name)") {
			shared++
		} else {
			perRequest++
		}
	}
	return shared, perRequest
}

func TestSharedEvaluation(t *testing.T) {
	w := newSharedWorld(6)
	clock := clocktesting.NewFakeClock(fixedNow)
	e := w.env(t, envOptions{clock: clock})
	// Values are milli-quantities of "i.j": the same both ways.
	for i := range 6 {
		w.values[fmt.Sprintf("ns%d", i)] = map[string]string{"p-0": fmt.Sprint(i), "p-1": fmt.Sprintf("%d.1", i), "p-2": fmt.Sprintf("%d.2", i)}
	}
	check := func(step string, ns int, wantShared, wantPerRequest int) {
		t.Helper()
		got := values(t, e, fmt.Sprintf("ns%d", ns))
		if diff := cmp.Diff(wantValues(ns), got); diff != "" {
			t.Errorf("%s: values of ns%d (-want +got):\n%s", step, ns, diff)
		}
		s, p := countShared(e.prom.sent())
		if s != wantShared || p != wantPerRequest {
			t.Errorf("%s: %d shared and %d per-request queries sent, want %d and %d:\n%s", step, s, p, wantShared, wantPerRequest, strings.Join(e.prom.sent(), "\n"))
		}
	}
	// Below MinNamespaces (3) within MaxAge: per request.
	check("first namespace", 0, 0, 1)
	check("second namespace", 1, 0, 2)
	// The third namespace starts sharing: one shared query; p-new is not
	// in it and is asked for per request.
	check("third namespace", 2, 1, 3)
	check("fourth namespace, from the shared answer", 3, 1, 4)
	if q := e.prom.sent()[4]; !strings.Contains(q, `pod_name="p-new"`) || !strings.Contains(q, `namespace="ns3"`) {
		t.Errorf("the missing object's query = %s, want one naming only p-new in ns3", q)
	}
	// A late series: its pod is answered at once, from the per-request query.
	w.update(func() { w.late["ns4"] = map[string]string{"p-new": "7"} })
	got := values(t, e, "ns4")
	if diff := cmp.Diff([]string{"p-0=4", "p-1=4100m", "p-2=4200m", "p-new=7"}, got); diff != "" {
		t.Errorf("late series (-want +got):\n%s", diff)
	}
	// Within MaxAge the shared answer stands, changed data or not; a
	// lead before it expires, it is refreshed in the background.
	w.update(func() { w.values["ns5"]["p-0"] = "9" })
	clock.SetTime(fixedNow.Add(provider.DefaultSharedMaxAge - refreshLead - time.Millisecond))
	if got := values(t, e, "ns5")[0]; got != "p-0=5" {
		t.Errorf("before the refresh: p-0 = %s, want the shared answer's p-0=5", got)
	}
	clock.SetTime(fixedNow.Add(provider.DefaultSharedMaxAge - refreshLead))
	waitShared(t, e, 2)
	waitArmed(t, clock)
	if got := values(t, e, "ns5")[0]; got != "p-0=9" {
		t.Errorf("after the refresh: p-0 = %s, want the new p-0=9", got)
	}
	// Nobody asks for more than two periods: the refreshes stop, and an
	// expired answer is never served.
	clock.SetTime(fixedNow.Add(4 * provider.DefaultSharedMaxAge))
	w.update(func() { w.values["ns5"]["p-0"] = "11" })
	if got := values(t, e, "ns5")[0]; got != "p-0=11" {
		t.Errorf("past MaxAge: p-0 = %s, want the new p-0=11", got)
	}
	if s, _ := countShared(e.prom.sent()); s != 2 {
		t.Errorf("%d shared queries sent, want 2 (no refresh of an idle key):\n%s", s, strings.Join(e.prom.sent(), "\n"))
	}
}

// refreshLead is how long before expiry a shared answer is refreshed: the
// least lead, as evaluations take no time on the fake clock.
const refreshLead = provider.SharedRefreshMinLead

// waitShared waits for the background refresh to have sent the n-th shared
// query (the refresh runs in its own goroutine).
func waitShared(t *testing.T, e *env, n int) {
	t.Helper()
	if !eventually(func() bool { s, _ := countShared(e.prom.sent()); return s >= n }) {
		s, _ := countShared(e.prom.sent())
		t.Fatalf("%d shared queries sent, want %d:\n%s", s, n, strings.Join(e.prom.sent(), "\n"))
	}
}

// eventually polls cond every millisecond and reports whether it held
// within 10 s.
func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// A request arriving while the refresh ahead of expiry is running reads
// the answer in service: it never waits for the grouped query. Periods of
// requests keep the refreshes going, one shared query per refresh.
func TestSharedEvaluationRefreshAhead(t *testing.T) {
	w := newSharedWorld(6)
	nss := w.nss
	gate := make(chan struct{})
	var blocking atomic.Bool
	answer := func(q string) (int, string) {
		if blocking.Load() && strings.Contains(q, "by (namespace,pod_name)") {
			<-gate
		}
		return w.answer(q)
	}
	clock := clocktesting.NewFakeClock(fixedNow)
	e := w.env(t, envOptions{answer: answer, clock: clock})
	for _, ns := range nss[:3] { // sharing starts
		values(t, e, ns)
	}
	waitArmed(t, clock)
	maxAge := provider.DefaultSharedMaxAge
	// Each period: the refresh runs, held in Prometheus, while every
	// namespace asks; all are answered (from the previous answer).
	for period := 1; period <= 3; period++ {
		refreshAt := fixedNow.Add(time.Duration(period) * (maxAge - refreshLead))
		blocking.Store(true)
		clock.SetTime(refreshAt)
		waitArrived(t, e, period+1)
		for _, ns := range nss {
			if got := values(t, e, ns); len(got) != 3 {
				t.Errorf("period %d: %s answered %v while the refresh was held", period, ns, got)
			}
		}
		blocking.Store(false)
		gate <- struct{}{}
		waitArmed(t, clock)
	}
	if s, _ := countShared(e.prom.sent()); s != 4 {
		t.Errorf("%d shared queries sent in 3 periods, want 4 (the first and one refresh per period)", s)
	}
	// Nobody asks any more: refreshes go on while the last request is at
	// most two MaxAge periods old (two more), then stop.
	for period := 4; period <= 6; period++ {
		clock.SetTime(fixedNow.Add(time.Duration(period) * (maxAge - refreshLead)))
		if period < 6 {
			waitShared(t, e, period+1)
			waitArmed(t, clock)
		}
	}
	time.Sleep(50 * time.Millisecond) // a refresh started by mistake would have sent its query
	if s, _ := countShared(e.prom.sent()); s != 6 || clock.HasWaiters() {
		t.Errorf("idle key: %d shared queries sent, want 6; refresh still armed: %t", s, clock.HasWaiters())
	}
}

// waitArrived waits until Prometheus received the n-th shared query (held
// or answered).
func waitArrived(t *testing.T, e *env, n int) { waitShared(t, e, n) }

// waitArmed waits until a refresh is armed on the clock: the refresh that
// ran has published its answer.
func waitArmed(t *testing.T, clock *clocktesting.FakeClock) {
	t.Helper()
	if !eventually(clock.HasWaiters) {
		t.Fatal("no refresh armed after the shared evaluation")
	}
}

func TestSharedEvaluationFallbacks(t *testing.T) {
	tests := []struct {
		name       string
		shared     provider.SharedConfig
		failShared bool
		wantShared int
	}{
		{name: "disabled", shared: provider.SharedConfig{Disabled: true}, wantShared: 0},
		{name: "too large: served once, then per request", shared: provider.SharedConfig{MaxSeries: 5}, wantShared: 1},
		{name: "too many label bytes", shared: provider.SharedConfig{MaxBytes: 100}, wantShared: 1},
		{name: "shared query fails: per request", failShared: true, wantShared: 1},
		{name: "defaults", wantShared: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newSharedWorld(6)
			answer := w.answer
			if tt.failShared {
				answer = func(q string) (int, string) {
					if strings.Contains(q, "by (namespace,pod_name)") {
						return http.StatusUnprocessableEntity, `{"status":"error","errorType":"execution","error":"too many samples"}`
					}
					return w.answer(q)
				}
			}
			e := w.env(t, envOptions{answer: answer, shared: tt.shared})
			for i, ns := range w.nss {
				got := values(t, e, ns)
				if diff := cmp.Diff(wantValues(i), got); diff != "" {
					t.Errorf("values of %s (-want +got):\n%s", ns, diff)
				}
			}
			if s, _ := countShared(e.prom.sent()); s != tt.wantShared {
				t.Errorf("%d shared queries sent, want %d:\n%s", s, tt.wantShared, strings.Join(e.prom.sent(), "\n"))
			}
		})
	}
}

// Concurrent requests of many namespaces share one evaluation (run with
// -race).
func TestSharedEvaluationConcurrent(t *testing.T) {
	const n = 40
	w := newSharedWorld(n)
	nss := w.nss
	e := w.env(t, envOptions{})
	for i := range 3 { // start sharing
		values(t, e, nss[i])
	}
	arrived, release := e.prom.hold(n)
	var wg sync.WaitGroup
	results := make([][]string, n)
	for i := 3; i < n; i++ {
		wg.Go(func() { results[i] = values(t, e, nss[i]) })
	}
	<-arrived
	release()
	wg.Wait()
	for i := 3; i < n; i++ {
		if len(results[i]) != 3 || results[i][2] != fmt.Sprintf("p-2=%d200m", i) {
			t.Errorf("values of %s = %v", nss[i], results[i])
		}
	}
	if s, _ := countShared(e.prom.sent()); s != 1 {
		t.Errorf("%d shared queries sent for %d concurrent namespaces, want 1", s, n-3)
	}
}
