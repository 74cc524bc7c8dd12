#!/usr/bin/env bash
# fuzz: run every native Go fuzzer in the module for FUZZTIME each (default 60s).
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-60s}
fail=0
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for fz in $(grep -hoE '^func (Fuzz[A-Za-z0-9_]+)\(' "$dir"/*_test.go 2>/dev/null | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/' | sort -u); do
    echo ">> $pkg $fz ($FUZZTIME)"
    if ! go test -run='^$' -fuzz="^${fz}\$" -fuzztime="$FUZZTIME" -fuzzminimizetime=10s "$pkg"; then
      echo "FUZZ FAILURE: $pkg $fz"; fail=1
    fi
  done
done
exit $fail
