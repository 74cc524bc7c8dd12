#!/usr/bin/env bash
# up.sh: start the local environment (etcd, kube-apiserver, Prometheus with a
# test exporter, the adapter, kube-controller-manager) in the background and
# return once it is ready. Writes _output/env.sh; stop it with `make down`.
#   PROMETHEUS_URL=http://host:9090  use your Prometheus instead of a local one
#   ADAPTER_CONFIG=rules.yaml        your adapter rules (default deploy/base/config.yaml)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=$ROOT/_output
PIDFILE=$OUT/localenv.pid
ENVFILE=$OUT/env.sh
LOG=$OUT/localenv.log
mkdir -p "$OUT/bin"

if [[ -f $PIDFILE ]] && kill -0 "$(<"$PIDFILE")" 2>/dev/null; then
  echo ">> already up (pid $(<"$PIDFILE")); source $ENVFILE, or make down"
  exit 0
fi
[[ -z ${ADAPTER_CONFIG:-} ]] || ADAPTER_CONFIG=$(cd "$(dirname "$ADAPTER_CONFIG")" && pwd)/$(basename "$ADAPTER_CONFIG")
export ADAPTER_CONFIG PROMETHEUS_URL=${PROMETHEUS_URL:-}

echo ">> building the environment runner"
go build -o "$OUT/bin/localenv" ./test/cmd/localenv
rm -f "$ENVFILE"
# setsid: the environment outlives this shell and ignores its Ctrl-C.
setsid "$OUT/bin/localenv" up --dir "$OUT/localenv" --env-file "$ENVFILE" -v >"$LOG" 2>&1 </dev/null &
echo $! >"$PIDFILE"
pid=$!
echo ">> starting (pid $pid, log $LOG)"
for ((i = 0; i < 360; i++)); do
  if [[ -f $ENVFILE ]]; then
    grep -E '^>> .*(ready|starting|using|WARNING)' "$LOG" | sed 's/^/   /' || true
    echo ">> up. Use it with:"
    echo "   source $ENVFILE && \$KUBECTL get --raw /apis/custom.metrics.k8s.io/v1beta2"
    echo ">> stop it with: make down"
    exit 0
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "!! the environment failed to start; last log lines:" >&2
    tail -n 40 "$LOG" >&2
    rm -f "$PIDFILE"
    exit 1
  fi
  sleep 0.5
done
echo "!! not ready after 180s; log: $LOG" >&2
"$ROOT/hack/down.sh"
exit 1
