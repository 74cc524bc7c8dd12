# promscaler: the adapter and the autoscaler in one small image.
#   docker build -t promscaler .
#   docker run promscaler            -> /adapter (default)
#   entrypoint /autoscaler           -> the autoscaler
# Stage 1 builds static binaries; stage 2 is distroless, non-root.
ARG GO_VERSION=1.26
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS=linux
ARG TARGETARCH=amd64
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w" -o /out/ ./cmd/adapter ./cmd/autoscaler

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/adapter /adapter
COPY --from=build /out/autoscaler /autoscaler
USER 65532:65532
ENTRYPOINT ["/adapter"]
