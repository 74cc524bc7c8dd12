# promscaler: the adapter and the autoscaler in one small image.
# `make image` builds the same image for linux/amd64 and linux/arm64 without a
# container engine (hack/image.sh); this file is for engines with BuildKit:
#   docker buildx build --platform linux/amd64,linux/arm64 --build-arg VERSION=$(git describe --tags --always) -t promscaler .
#   docker run promscaler            -> /adapter (default)
#   entrypoint /autoscaler           -> the autoscaler
# Stage 1 builds static binaries; stage 2 is distroless, non-root.
ARG GO_VERSION=1.26
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# Set by the builder for each --platform; no default here, or a default would
# override it and every platform would get that architecture's binaries.
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=devel
ARG REVISION=unknown
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    test -n "$TARGETARCH" || { echo "TARGETARCH unset: build with BuildKit (docker buildx, podman build --platform)"; exit 1; }; \
    CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X github.com/promscaler/promscaler/internal/version.version=$VERSION -X github.com/promscaler/promscaler/internal/version.revision=$REVISION" \
      -o /out/ ./cmd/adapter ./cmd/autoscaler

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/adapter /adapter
COPY --from=build /out/autoscaler /autoscaler
USER 65532:65532
ENTRYPOINT ["/adapter"]
