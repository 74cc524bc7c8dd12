#!/usr/bin/env bash
# down.sh: stop the environment `make up` started (every process, its files).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$ROOT/_output
PIDFILE=$OUT/localenv.pid
if [[ ! -f $PIDFILE ]]; then
  echo ">> not up"
  exit 0
fi
pid=$(<"$PIDFILE")
if kill -0 "$pid" 2>/dev/null; then
  echo ">> stopping pid $pid"
  kill -TERM "$pid"
  for ((i = 0; i < 60; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "!! still running after 30s: SIGKILL (its children die with it)" >&2
    kill -KILL "$pid"
  fi
fi
rm -rf "$PIDFILE" "$OUT/env.sh" "$OUT/localenv"
echo ">> down"
