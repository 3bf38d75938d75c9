# The needle image: needled (the entrypoint) and the needle CLI, built from
# this checkout and run as a non-root user from a minimal base.
#
#   docker build -t needle .
#   docker run -d -e NEEDLE_API_TOKEN=... -e NEEDLE_LISTEN=/ip4/127.0.0.1/tcp/4001 \
#       -p 127.0.0.1:7070:7070 -v needle-data:/var/lib/needle needle
#
# A peer alone listens on loopback: the image's NEEDLE_LISTEN (all
# interfaces) needs a swarm key (NEEDLE_SWARM_KEY), or needled refuses to
# start an open mesh.
#
# deploy/compose.yaml runs a three-peer private mesh of it; docs/operations.md
# explains every variable. GO_IMAGE and BASE_IMAGE may name a mirror.
ARG GO_IMAGE=docker.io/library/golang:1.26-bookworm
ARG BASE_IMAGE=gcr.io/distroless/static-debian12:nonroot

# Build: the same static, stamped binaries as `make release`.
FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
ARG TARGETARCH
# The data dir is made 0700 here, as /out/state/needle, a directory inside
# the one copied: COPY keeps the mode of what it copies, but gives the
# directory it copies into its own (buildah 0755). A new volume takes the
# image's mode, and with 0755 every container's needled warned "data dir is
# readable by others ... chmod 700 it", which the shell-less image cannot do.
RUN make release DIST=/out PLATFORMS="linux/${TARGETARCH:-$(go env GOARCH)}" VERSION="$VERSION" COMMIT="$COMMIT" && \
    mkdir -p /out/bin /out/keys /out/state && install -d -m 0700 /out/state/needle && \
    mv /out/needled-linux-* /out/bin/needled && mv /out/needle-linux-* /out/bin/needle

# Run: no shell, no package manager; uid 65532 owns the data and key dirs
# (the data dir 0700, as needled wants it).
FROM ${BASE_IMAGE}
COPY --from=build /out/bin/ /usr/local/bin/
COPY --from=build --chown=65532:65532 /out/state/ /var/lib/
COPY --from=build --chown=65532:65532 /out/keys/ /etc/needle/
USER 65532:65532
# A stop drains first: SIGTERM makes needled hand its work over for at most
# NEEDLE_DRAIN_TIMEOUT, which is below Docker's default 10 s stop timeout so
# that `docker stop` never kills a drain half way. Compose and Kubernetes
# give a longer stop grace period and a longer drain (deploy/).
ENV PATH=/usr/local/bin:/usr/bin:/bin \
    NEEDLE_DATA=/var/lib/needle \
    NEEDLE_HTTP=0.0.0.0:7070 \
    NEEDLE_LISTEN=/ip4/0.0.0.0/tcp/4001 \
    NEEDLE_DRAIN_TIMEOUT=8s \
    NEEDLE_ADDR=http://127.0.0.1:7070
VOLUME ["/var/lib/needle"]
EXPOSE 7070/tcp 4001/tcp
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD ["needle", "health", "--timeout", "4s"]
ENTRYPOINT ["needled"]
