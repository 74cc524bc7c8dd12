//go:build e2e && chaos

package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

type kind int

const (
	kindCustom kind = iota
	kindExternal
	// kindChurn asks for the soak's churning pods: every value is 1.
	kindChurn
	// kindSecond asks for the truth metric served from the second backend
	// (backends_test.go).
	kindSecond
	// kindDiscovery asks for the custom metrics discovery document (any
	// 200 with a JSON body is correct).
	kindDiscovery
	// kindTeam asks for the other team's metric, served by its own team
	// rules ConfigMap (teams_test.go).
	kindTeam
	// kindTeamHeavy asks for the misbehaving team's slow metric (any 200
	// is correct).
	kindTeamHeavy
)

func (k kind) String() string {
	return [...]string{"custom", "external", "churn", "second backend", "discovery", "other team", "team's slow metric"}[k]
}

func (k kind) path() string {
	switch k {
	case kindSecond:
		return "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + truthNamespace + "/pods/*/" + secondMetric
	case kindDiscovery:
		return "/apis/custom.metrics.k8s.io/v1beta2"
	case kindTeam:
		return "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + otherTeam + "/pods/*/" + teamMetric
	case kindTeamHeavy:
		return "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + slowTeam + "/pods/*/" + teamHeavyMetric
	}
	if k == kindChurn {
		return "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + churnNamespace + "/pods/*/" + churnPodMetric
	}
	if k == kindExternal {
		return "/apis/external.metrics.k8s.io/v1beta1/namespaces/" + truthNamespace + "/" + truthExternal + "?labelSelector=queue%3Djobs"
	}
	return "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + truthNamespace + "/pods/*/" + truthMetric
}

// result is one request's outcome.
type result struct {
	kind       kind
	start, end time.Time
	// status is the HTTP status, 0 when no answer came (err says why).
	status int
	err    string
	// wrong: a 200 with a value that differs from the truth (or for an
	// object that has none). partial: a 200 missing some of the pods.
	wrong, partial bool
	// body is kept for wrong answers (diagnostics).
	body string
}

func (r result) correct() bool { return r.status == http.StatusOK && !r.wrong && !r.partial }

// ask sends one request of kind k through the aggregator and checks the answer.
func (s *stack) ask(ctx context.Context, k kind) result {
	return s.askAt(ctx, k, s.api, s.env.APIServerURL)
}

// askAt is ask sent with hc to base (kube-apiserver's URL, or the
// adapter's own).
func (s *stack) askAt(ctx context.Context, k kind, hc *http.Client, base string) result {
	r := result{kind: k, start: time.Now()}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	body, code, err := framework.Get(ctx, hc, base+k.path())
	r.end, r.status = time.Now(), code
	if err != nil {
		r.status = 0
		r.err = classify(err)
		return r
	}
	if code == http.StatusOK {
		if r.wrong, r.partial = check(k, body); r.wrong {
			r.body = string(body)
		}
	}
	return r
}

func classify(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	default:
		return "conn"
	}
}

// check compares a 200 answer with the truth.
func check(k kind, body []byte) (wrong, partial bool) {
	switch k {
	case kindDiscovery, kindTeamHeavy:
		return !json.Valid(body), false
	}
	var list struct {
		Items []struct {
			DescribedObject struct {
				Name string `json:"name"`
			} `json:"describedObject"`
			Value resource.Quantity `json:"value"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return true, false
	}
	if k == kindChurn {
		for _, it := range list.Items {
			if it.Value.MilliValue() != 1000 {
				return true, false
			}
		}
		return false, false
	}
	if k == kindTeam {
		if len(list.Items) != 1 {
			return len(list.Items) > 1, len(list.Items) == 0
		}
		it := list.Items[0]
		return it.DescribedObject.Name != teamPod || it.Value.MilliValue() != teamMilli, false
	}
	if k == kindExternal {
		if len(list.Items) != 1 {
			return len(list.Items) > 1, len(list.Items) == 0
		}
		return list.Items[0].Value.MilliValue() != truthQueueMilli, false
	}
	seen := 0
	for _, it := range list.Items {
		want := int64(-1)
		for i := range truthPods {
			if truthPod(i) == it.DescribedObject.Name {
				want = truthMilli(i)
			}
		}
		if want < 0 || it.Value.MilliValue() != want {
			return true, false
		}
		seen++
	}
	return false, seen < truthPods
}

// loader sends requests at a fixed rate, alternating custom and external,
// each in its own goroutine, and keeps every outcome.
type loader struct {
	s    *stack
	rate int
	// churnEvery: every churnEvery-th request asks kindChurn (0: never).
	churnEvery int
	// mix, when set, is the kinds asked in turn (instead of custom and
	// external alternating).
	mix []kind
	// hc and base, when set, send the requests to base with hc instead of
	// through the aggregator.
	hc   *http.Client
	base string
	mu   sync.Mutex
	res  []result
	stop chan struct{}
	done sync.WaitGroup
}

func (s *stack) startLoad(rate, churnEvery int) *loader {
	return s.startMixedLoad(rate, churnEvery, nil, nil, "")
}

// startMixedLoad is startLoad asking the kinds of mix in turn (when set),
// sent with hc to base when hc is set.
func (s *stack) startMixedLoad(rate, churnEvery int, mix []kind, hc *http.Client, base string) *loader {
	l := &loader{s: s, rate: rate, churnEvery: churnEvery, mix: mix, hc: hc, base: base, stop: make(chan struct{})}
	l.done.Add(1)
	go l.run()
	return l
}

func (l *loader) run() {
	defer l.done.Done()
	tick := time.NewTicker(time.Second / time.Duration(l.rate))
	defer tick.Stop()
	ctx := context.Background()
	for n := 0; ; n++ {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		k := kindCustom
		switch {
		case len(l.mix) > 0:
			k = l.mix[n%len(l.mix)]
		case n%2 == 1:
			k = kindExternal
		}
		if l.churnEvery > 0 && n%l.churnEvery == l.churnEvery-1 {
			k = kindChurn
		}
		l.done.Add(1)
		go func() {
			defer l.done.Done()
			r := l.ask(ctx, k)
			l.mu.Lock()
			l.res = append(l.res, r)
			l.mu.Unlock()
		}()
	}
}

func (l *loader) ask(ctx context.Context, k kind) result {
	if l.hc != nil {
		return l.s.askAt(ctx, k, l.hc, l.base)
	}
	return l.s.ask(ctx, k)
}

// close stops sending and waits for the answers in flight.
func (l *loader) close() {
	close(l.stop)
	l.done.Wait()
}

// window summarizes the requests that started in [from, to).
type window struct {
	total, ok, wrong, partial int
	// errors counts non-200 answers by status and failures without an
	// answer by their kind (timeout, conn).
	errors map[string]int
	// p99 and maxLatency are over every request of the window.
	p99, maxLatency time.Duration
	// wrongBodies are up to three distinct wrong answers.
	wrongBodies []string
}

func (l *loader) window(from, to time.Time) window {
	return l.windowOf(nil, from, to)
}

// windowOf is window over the requests of the kinds ks (all when none).
func (l *loader) windowOf(ks []kind, from, to time.Time) window {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := window{errors: map[string]int{}}
	var lat []float64
	for _, r := range l.res {
		if r.start.Before(from) || !r.start.Before(to) || len(ks) > 0 && !slices.Contains(ks, r.kind) {
			continue
		}
		w.total++
		lat = append(lat, float64(r.end.Sub(r.start)))
		switch {
		case r.status == 0:
			w.errors[r.err]++
		case r.status != http.StatusOK:
			w.errors[fmt.Sprint(r.status)]++
		case r.wrong:
			w.wrong++
			if len(w.wrongBodies) < 3 && !slices.Contains(w.wrongBodies, r.body) {
				w.wrongBodies = append(w.wrongBodies, r.body)
			}
		case r.partial:
			w.partial++
		default:
			w.ok++
		}
	}
	if len(lat) > 0 {
		sort.Float64s(lat)
		w.p99 = time.Duration(lat[(len(lat)*99)/100])
		w.maxLatency = time.Duration(lat[len(lat)-1])
	}
	return w
}

func (w window) errorText() string {
	if len(w.errors) == 0 {
		return "-"
	}
	keys := slices.Sorted(maps.Keys(w.errors))
	out := ""
	for i, k := range keys {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%s×%d", k, w.errors[k])
	}
	return out
}

// recovery is how long after end the first correct answer to a request
// started at or after end arrived; false if none has yet.
func (l *loader) recovery(end time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first time.Time
	for _, r := range l.res {
		if r.start.Before(end) || !r.correct() {
			continue
		}
		if first.IsZero() || r.end.Before(first) {
			first = r.end
		}
	}
	if first.IsZero() {
		return 0, false
	}
	return first.Sub(end), true
}
