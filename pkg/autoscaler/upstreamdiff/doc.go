// Package upstreamdiff checks the decision core against the real
// kube-controller-manager 1.37 code. It is a separate Go module (it needs
// k8s.io/kubernetes, which the main module must not depend on), so the
// main module's `go test ./...` does not run it. Run it with
//
//	cd pkg/autoscaler/upstreamdiff && go test .
//
// TestDifferential builds random pods (phases, deletion, readiness and its
// transition time, start times, container, sidecar and pod-level requests),
// samples (values, timestamps, windows, extraneous and missing samples) and
// tolerances, and compares every metric source's proposal and current value
// with upstream's ReplicaCalculator. TestReconcileDifferential runs random
// HPAs (one to three metrics of every type, failing metrics, behaviors with
// random policies and select policies, tolerances, ScaledToZero, current
// counts in and out of range) through upstream's HorizontalController with
// fake clients and compares the scale update, the written status
// (replicas, current metrics, conditions with their messages) and the
// events recorded.
// TestSequenceDifferential lets the real controller reconcile random HPAs
// (stabilization windows, rate policies) once a second with a changing
// metric and replays the same reconciles at the same instants through the
// core: the replica sequences and final conditions must agree. SEED picks
// the random sequence, N the number of single reconciles, SEQ the number
// of sequences.
package upstreamdiff
