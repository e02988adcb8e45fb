# syntax=docker/dockerfile:1
#
# holdfast: one static binary in an empty image, run as UID 65532: the
# registry path to the image scripts/release.sh builds with buildah (same
# binaries, file capabilities, user, entrypoint and labels; tests/release.rs
# compares the two). From a checkout:
#
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg REVISION=$(git rev-parse HEAD) \
#     --build-arg SOURCE_DATE_EPOCH=$(git log -1 --format=%ct) \
#     --build-arg SOURCE_URL=https://… -t REGISTRY/holdfast:VERSION --push .
#
# The build stage runs on linux/amd64 (under emulation on other hosts) and
# builds each architecture as scripts/release.sh does: x86_64 with Debian's
# musl-gcc, aarch64 cross-compiled with Debian's aarch64 gcc, linked as a
# static PIE by scripts/static-pie-cc (.cargo/config.toml names both). No
# QEMU for the arm64 compile, and the same compilers as the release.
#
# The base is pinned by digest (rust:1.95-bookworm); renew it with the Rust
# version (rust-toolchain and Cargo.toml's rust-version).

ARG RUST_IMAGE=rust:1.95-bookworm@sha256:6258907abe69656e41cd992e0b705cdcfabcbbe3db374f92ed2d47121282d4a1

FROM --platform=linux/amd64 ${RUST_IMAGE} AS build
ARG TARGETARCH
# The commit (the build context has no .git: holdfast version reports it)
# and the date every timestamp takes (reproducible builds).
ARG REVISION=unknown
ARG SOURCE_DATE_EPOCH
RUN apt-get update \
 && apt-get install -y --no-install-recommends musl-tools gcc-aarch64-linux-gnu libc6-dev-arm64-cross libcap2-bin \
 && rm -rf /var/lib/apt/lists/*
RUN case "${TARGETARCH}" in \
      amd64) echo x86_64-unknown-linux-musl ;; \
      arm64) echo aarch64-unknown-linux-musl ;; \
      *) echo "unsupported TARGETARCH ${TARGETARCH}: amd64 or arm64" >&2; exit 1 ;; \
    esac > /target-triple \
 && rustup target add "$(cat /target-triple)"
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target,id=holdfast-target-${TARGETARCH} \
    HOLDFAST_COMMIT="${REVISION}" \
    cargo build --locked --release --target "$(cat /target-triple)" --bin holdfast \
 && install -D -m 0755 "target/$(cat /target-triple)/release/holdfast" /out/holdfast \
 && setcap cap_net_raw,cap_net_bind_service+p /out/holdfast
# NET_RAW and NET_BIND_SERVICE as file capabilities, permitted only (no
# effective bit): unused unless a pod keeps one in its bounding set and
# allows privilege escalation (deploy/components/unnumbered,
# deploy/overlays/listen-179), and then raised only by the thread that
# needs it, for the one call (README: Unnumbered peering, Listening on port
# 179). Under the base DaemonSet (every capability dropped, no_new_privs)
# they grant nothing and change nothing.

FROM scratch
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG SOURCE_URL=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="holdfast" \
      org.opencontainers.image.description="A BGP speaker for Kubernetes nodes that keeps Service VIP routes steady" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE_URL}" \
      org.opencontainers.image.created="${CREATED}"
COPY --from=build /out/holdfast /usr/local/bin/holdfast
# No shell, no libc, no users: a numeric UID (the "nonroot" of distroless).
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/holdfast"]
CMD ["run", "--config", "/etc/holdfast/holdfast.toml"]
