#!/usr/bin/env bash
# image.sh (make image): build promscaler's container image for linux/amd64
# and linux/arm64 with no container engine. Cross-compiles static binaries,
# then hack/tools/image (go-containerregistry) lays them on a scratch base
# holding Debian's CA bundle and the non-root user 65532, and writes
#   _output/image          OCI image layout (index of both platforms)
#   _output/image.oci.tar  the same as one file (podman load -i, skopeo oci-archive:)
# Reproducible: the same commit gives the same digest (times are the commit
# time, or SOURCE_DATE_EPOCH; paths are trimmed).
#
#   PLATFORMS="linux/amd64 linux/arm64"  VERSION=... (default git describe)
#   IMAGE_OUT=dir (default _output): where image/, image.oci.tar, image-bin/ go
#   IMAGE_BIN=dir (default $IMAGE_OUT/image-bin), IMAGE_REUSE_BINARIES=1: assemble
#   the image from binaries already built there (the image test does, to check
#   that assembling is deterministic without compiling twice)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${IMAGE_OUT:-$ROOT/_output}
PLATFORMS=${PLATFORMS:-linux/amd64 linux/arm64}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo devel)}
REVISION=${REVISION:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
if [[ -n ${SOURCE_DATE_EPOCH:-} ]]; then
  CREATED=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
else
  CREATED=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null || echo 1970-01-01T00:00:00Z)
fi
CA_CERTS=${CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}
[[ -f $CA_CERTS ]] || { echo "image.sh: no $CA_CERTS (apt-get install ca-certificates)" >&2; exit 1; }
log() { printf '>> [image %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

pkg=github.com/promscaler/promscaler/internal/version
ldflags="-s -w -buildid= -X $pkg.version=$VERSION -X $pkg.revision=$REVISION"
args=()
for p in $PLATFORMS; do
  dir=${IMAGE_BIN:-$OUT/image-bin}/${p/\//_}
  args+=(-platform "$p=$dir")
  [[ ${IMAGE_REUSE_BINARIES:-} == 1 ]] && continue
  mkdir -p "$dir"
  log "building adapter, autoscaler for $p ($VERSION)"
  CGO_ENABLED=0 GOOS=${p%/*} GOARCH=${p#*/} go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$dir/" ./cmd/adapter ./cmd/autoscaler
done

tool=$OUT/tools/image
log "building the image tool (hack/tools/image)"
(cd hack/tools/image && GOWORK=off CGO_ENABLED=0 go build -trimpath -o "$tool" .)
"$tool" -out "$OUT/image" -archive "$OUT/image.oci.tar" -version "$VERSION" -revision "$REVISION" \
  -created "$CREATED" -ca-certs "$CA_CERTS" "${args[@]}"
log "$(du -h "$OUT/image.oci.tar" | cut -f1) $OUT/image.oci.tar"
