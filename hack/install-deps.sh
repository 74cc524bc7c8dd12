#!/usr/bin/env bash
# install-deps: the system packages the tests and the demo need (idempotent).
# Debian packages: prometheus (2.42, also ships promtool), openssl for test PKI.
set -euo pipefail
need=()
command -v openssl >/dev/null || need+=(openssl)
[[ -x /usr/bin/prometheus ]] || need+=(prometheus)
command -v promtool >/dev/null || need+=(prometheus)
if (( ${#need[@]} )); then
  echo ">> apt-get install ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # The package's service must not start (policy-rc.d denies it on these machines anyway).
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
echo ">> system deps ok"
