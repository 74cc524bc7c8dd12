#!/usr/bin/env bash
# bench: Go benchmarks (with allocations) and the load harnesses that need the
# real environment. Results go to _output/bench/ for benchstat.
set -euo pipefail
cd "$(dirname "$0")/.."
out=_output/bench; mkdir -p "$out"
stamp=$(date +%Y%m%d-%H%M%S)
echo ">> go benchmarks"
go test -run='^$' -bench=. -benchmem -count=${BENCHCOUNT:-1} ./... | tee "$out/go-$stamp.txt"
if compgen -G "test/bench/*" >/dev/null; then
  echo ">> load harnesses (real Prometheus)"
  go test -tags e2e,bench -run='^$' -bench=. -benchmem -timeout 60m -p 1 ./test/bench/... | tee "$out/load-$stamp.txt"
fi
