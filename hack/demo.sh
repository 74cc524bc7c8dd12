#!/usr/bin/env bash
# demo.sh (make demo): on a fresh machine, install and build what is
# missing, start the local environment with the adapter and the upstream HPA,
# and show a demo app scaling up under load and back down, live. Ctrl-C (or
# the end of the scenario, ~2-3 minutes) stops everything it started.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=$ROOT/_output
t0=$SECONDS
if [[ ! -x /usr/bin/prometheus && $(id -u) == 0 ]]; then
  hack/install-deps.sh
fi
# make demo already ran `tools` and `build`; run directly, they are cached.
hack/tools.sh
if [[ ! -x $OUT/bin/adapter ]]; then
  echo ">> building the adapter"
  CGO_ENABLED=0 go build -trimpath -o "$OUT/bin/" ./cmd/...
fi
echo ">> building the demo runner"
go build -o "$OUT/bin/localenv" ./test/cmd/localenv
export PROMSCALER_TOOLS_DIR=${PROMSCALER_TOOLS_DIR:-$ROOT/.cache/tools}
export PROMSCALER_BIN_DIR=${PROMSCALER_BIN_DIR:-$OUT/bin}
echo ">> ready to start after $((SECONDS - t0))s"
# exec: Ctrl-C reaches the runner, which stops every process it started.
exec "$OUT/bin/localenv" demo --dir "$OUT/demo" --env-file "$OUT/demo-env.sh" "$@"
