#!/usr/bin/env bash
# bench: Go benchmarks (with allocations) and the load harness that needs the
# real environment (test/bench: etcd, kube-apiserver, Prometheus on a TSDB
# backfilled with generated series, the adapter). Results go to
# _output/bench/ for benchstat.
#
#   BENCH_SUITES   "go load" (default), "go" or "load"
#   BENCHCOUNT     -count of the Go benchmarks (default 1)
#   PROMSCALER_BENCH_*  sizes of the load harness (docs/performance.md)
set -euo pipefail
cd "$(dirname "$0")/.."
suites=${BENCH_SUITES:-go load}
# Run directly (not from `make bench`): build what the harness runs first.
if [[ -z ${MAKELEVEL:-} && $suites == *load* ]]; then
  make --no-print-directory tools build
fi
out=_output/bench; mkdir -p "$out"
stamp=$(date +%Y%m%d-%H%M%S)
if [[ $suites == *go* ]]; then
  echo ">> go benchmarks"
  go test -run='^$' -bench=. -benchmem -count=${BENCHCOUNT:-1} ./... | tee "$out/go-$stamp.txt"
fi
if [[ $suites == *load* ]] && compgen -G "test/bench/*" >/dev/null; then
  promtool=${PROMSCALER_PROMTOOL:-/usr/bin/promtool}
  [[ -x $promtool ]] || { echo "bench.sh: $promtool missing: run hack/install-deps.sh (Debian's prometheus package ships promtool)" >&2; exit 1; }
  echo ">> load harness (real Prometheus, kube-apiserver, adapter; load average: $(cut -d' ' -f1-3 /proc/loadavg))"
  # Each benchmark runs its measurement once (-benchtime=1x); the sizes come
  # from PROMSCALER_BENCH_* (default: 1,000,000 series).
  go test -tags e2e,bench -run='^$' -bench=. -benchtime=1x -benchmem -timeout 60m -p 1 ./test/bench/... | tee "$out/load-$stamp.txt"
fi
