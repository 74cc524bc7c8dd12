#!/usr/bin/env bash
# chaos: the fault suite (test/chaos, TestFaults) or the soak (TestSoak)
# against the real stack of test/e2e/framework: etcd, kube-apiserver,
# Prometheus, the adapter behind its APIServices, kube-apiserver's
# aggregator in front. Tables go to _output/chaos/ (docs/reliability.md).
#
#   hack/chaos.sh            the fault suite, the Prometheus restarts, the oversized answers, the stalled backend and the team faults (~25 min)
#   hack/chaos.sh soak       the one-hour soak (PROMSCALER_SOAK_DURATION, _RATE, _SAMPLE)
#   CHAOS_RUN=<regexp>       run only the matching faults (go test -run)
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-faults}
# Run directly (not from make): build what the suite runs first.
if [[ -z ${MAKELEVEL:-} ]]; then
  make --no-print-directory tools build
fi
mkdir -p _output/chaos
case $what in
  faults)
    run=${CHAOS_RUN:-TestFaults|TestPrometheusRestarts|TestOversizedAnswers|TestStalledBackend|TestTeamFaults}
    timeout=40m ;;
  soak)
    run=TestSoak
    timeout=${CHAOS_TIMEOUT:-3h} ;; # the test ends itself after PROMSCALER_SOAK_DURATION
  *) echo "chaos.sh: unknown suite $what (faults or soak)" >&2; exit 2 ;;
esac
echo ">> chaos $what (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
go test -tags e2e,chaos -count=1 -p 1 -timeout "$timeout" -run "$run" -v ./test/chaos/ 2>&1 | tee "_output/chaos/$what-$(date -u +%Y%m%d-%H%M%S).log"
