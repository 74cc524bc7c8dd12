#!/usr/bin/env bash
# manifests.sh (make manifests): render deploy/base, every overlay and
# deploy/monitoring with `kubectl kustomize` into _output/manifests/<name>.yaml,
# and base-all-apis.yaml: the base with the external-metrics and
# resource-metrics components (deploy/components) added.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=$ROOT/_output/manifests
KUBECTL=${KUBECTL:-${PROMSCALER_TOOLS_DIR:-$ROOT/.cache/tools}/kubectl}
if [[ ! -x $KUBECTL ]]; then
  KUBECTL=$(command -v kubectl || true)
  [[ -n $KUBECTL ]] || { echo "manifests.sh: no kubectl (run make tools, or set KUBECTL)" >&2; exit 1; }
fi
mkdir -p "$OUT"
render() { # name dir
  "$KUBECTL" kustomize "$2" >"$OUT/$1.yaml"
  echo ">> $OUT/$1.yaml ($(grep -c '^kind:' "$OUT/$1.yaml") objects)"
}
render base deploy/base
# The autoscaler component alone (it brings its own objects; an overlay adds
# it with `components: [../../components/autoscaler]`).
if [[ -d deploy/components/autoscaler ]]; then
  ctmp=$OUT/.component-autoscaler
  mkdir -p "$ctmp"
  printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\ncomponents:\n- %s\n' \
    "$(realpath --relative-to="$ctmp" deploy/components/autoscaler)" >"$ctmp/kustomization.yaml"
  render component-autoscaler "$ctmp"
  rm -rf "$ctmp"
fi
render monitoring deploy/monitoring
all=$(mktemp -d)
mkdir -p "$all/deploy"
cp -r deploy/base deploy/components "$all/deploy/"
mkdir -p "$all/deploy/all-apis"
cat >"$all/deploy/all-apis/kustomization.yaml" <<'YAML'
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../base
components:
- ../components/external-metrics
- ../components/resource-metrics
YAML
render base-all-apis "$all/deploy/all-apis"
rm -rf "$all"
# The Helm chart with the autoscaler on, when helm is built (hack/tools.sh helm).
HELM=${HELM:-${PROMSCALER_TOOLS_DIR:-$ROOT/.cache/tools}/helm}
if [[ -x $HELM && -d charts/promscaler ]]; then
  "$HELM" template promscaler charts/promscaler --namespace promscaler \
    --set autoscaler.enabled=true >"$OUT/chart-autoscaler.yaml"
  echo ">> $OUT/chart-autoscaler.yaml ($(grep -c '^kind:' "$OUT/chart-autoscaler.yaml") objects)"
fi
for d in deploy/overlays/*/; do
  d=${d%/}
  name=$(basename "$d")
  if [[ $name == tls-secret && ! -f $d/certs/tls.crt ]]; then
    # The overlay reads your certificate from certs/; render it with a
    # throwaway set so the output shows its shape.
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    cp -r deploy "$tmp/"
    go run ./test/cmd/gencerts -out "$tmp/deploy/overlays/tls-secret/certs" >/dev/null
    render "$name" "$tmp/deploy/overlays/tls-secret"
    echo "   (tls-secret rendered with a throwaway certificate: put yours in $d/certs/)"
    continue
  fi
  render "$name" "$d"
done
