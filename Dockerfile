# Multi-stage build: a static Go binary on a distroless, non-root base.
FROM golang:1.26 AS build
ARG VERSION=v0.0.0-dev
ARG GIT_COMMIT=unknown
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY apis/ apis/
COPY cmd/ cmd/
COPY pkg/ pkg/
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/argocd-agent-addon/argocd-agent-addon/pkg/version.Version=${VERSION} -X github.com/argocd-agent-addon/argocd-agent-addon/pkg/version.GitCommit=${GIT_COMMIT}" \
      -o /out/argocd-agent-addon ./cmd/argocd-agent-addon

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/argocd-agent-addon /argocd-agent-addon
USER 65532:65532
ENTRYPOINT ["/argocd-agent-addon"]
CMD ["manager"]
