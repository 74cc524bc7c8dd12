#!/usr/bin/env bash
# verify: formatting, vet, function length, staticcheck and a tidy go.mod. Fails on any finding.
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
go vet -tags e2e,keda ./test/e2e/
go vet -tags e2e,bench ./test/bench/...
go vet -tags e2e,chaos ./test/chaos/...
go vet -tags e2eengines ./test/engines/...

echo ">> function length (at most 80 lines, STYLE.md)"
go run ./hack/funclen -max 80 cmd pkg internal test hack

echo ">> staticcheck"
go run "honnef.co/go/tools/cmd/staticcheck@${STATICCHECK_VERSION}" ./...

# The main module, and the upstream-differential module that replaces it
# (pkg/autoscaler/upstreamdiff): a dependency change in the main go.mod
# must be carried there too, or make diff-upstream refuses to build.
for mod in . pkg/autoscaler/upstreamdiff; do
  echo ">> go mod tidy ($mod)"
  if ! out=$(cd "$mod" && GOWORK=off go mod tidy -diff 2>&1); then
    printf '%s\n' "$out"
    echo "$mod: go.mod/go.sum are not tidy: run 'go mod tidy' there"; exit 1
  fi
done
echo "verify: ok"
