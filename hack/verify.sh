#!/usr/bin/env bash
# verify: formatting, vet, staticcheck and a tidy go.mod. Fails on any finding.
set -euo pipefail
cd "$(dirname "$0")/.."
STATICCHECK_VERSION=${STATICCHECK_VERSION:-v0.8.2}

echo ">> gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' | grep -v '^hack/tools/') 2>/dev/null || true)
if [[ -n "$unformatted" ]]; then
  echo "gofmt needed on:"; echo "$unformatted"; exit 1
fi

echo ">> go vet"
go vet ./...
go vet -tags e2e ./test/...
go vet -tags e2e,bench ./test/bench/...

echo ">> staticcheck"
go run "honnef.co/go/tools/cmd/staticcheck@${STATICCHECK_VERSION}" ./...

echo ">> go mod tidy"
cp go.mod /tmp/promscaler.go.mod.bak; cp go.sum /tmp/promscaler.go.sum.bak
go mod tidy
if ! diff -q go.mod /tmp/promscaler.go.mod.bak >/dev/null || ! diff -q go.sum /tmp/promscaler.go.sum.bak >/dev/null; then
  diff -u /tmp/promscaler.go.mod.bak go.mod || true
  cp /tmp/promscaler.go.mod.bak go.mod; cp /tmp/promscaler.go.sum.bak go.sum
  echo "go.mod/go.sum are not tidy: run 'go mod tidy'"; exit 1
fi
echo "verify: ok"
