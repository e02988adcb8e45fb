# syntax=docker/dockerfile:1
#
# holdfast: one static binary in an empty image, run as UID 65532.
#
#   docker build -t holdfast .
#   docker buildx build --platform linux/amd64,linux/arm64 -t REGISTRY/holdfast:TAG --push .
#
# The build stage runs on the platform being built (under QEMU for a
# foreign one), so each architecture compiles natively against musl with
# its own Debian musl-tools: no cross compiler. C parts of dependencies
# (ring, pulled in by kube's rustls) are compiled with musl-gcc, named per
# target through CC_<triple>. This is the build scripts/test.sh checks for
# x86_64 (`cargo build --release --target x86_64-unknown-linux-musl`).
#
# Cross-compiling aarch64 on an x86_64 host instead (no QEMU) needs a C
# compiler for aarch64 musl, because ring has C and assembly parts: set
# CC_aarch64_unknown_linux_musl to one (e.g. aarch64-linux-musl-gcc from a
# musl cross toolchain) and CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER
# likewise, or use cargo-zigbuild. Debian's musl-gcc only targets its own
# architecture, which is why it is set per target here and not globally.

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS build
ARG TARGETARCH
RUN apt-get update \
 && apt-get install -y --no-install-recommends musl-tools libcap2-bin \
 && rm -rf /var/lib/apt/lists/*
RUN case "${TARGETARCH}" in \
      amd64) echo x86_64-unknown-linux-musl ;; \
      arm64) echo aarch64-unknown-linux-musl ;; \
      *) echo "unsupported TARGETARCH ${TARGETARCH}: amd64 or arm64" >&2; exit 1 ;; \
    esac > /target-triple \
 && rustup target add "$(cat /target-triple)"
ENV CC_x86_64_unknown_linux_musl=musl-gcc \
    CC_aarch64_unknown_linux_musl=musl-gcc
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target,id=holdfast-target-${TARGETARCH} \
    cargo build --locked --release --target "$(cat /target-triple)" --bin holdfast \
 && install -D -m 0755 "target/$(cat /target-triple)/release/holdfast" /out/holdfast \
 && setcap cap_net_raw+p /out/holdfast
# NET_RAW as a file capability, permitted only (no effective bit): unused
# unless a pod keeps NET_RAW in its bounding set and allows privilege
# escalation (deploy/components/unnumbered), and then raised only by the
# thread that opens unnumbered peering's ICMPv6 socket (README: Unnumbered
# peering). Under the base DaemonSet (every capability dropped,
# no_new_privs) it grants nothing and changes nothing.

FROM scratch
LABEL org.opencontainers.image.title="holdfast" \
      org.opencontainers.image.description="A BGP speaker for Kubernetes nodes that keeps Service VIP routes steady" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/holdfast /usr/local/bin/holdfast
# No shell, no libc, no users: a numeric UID (the "nonroot" of distroless).
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/holdfast"]
CMD ["run", "--config", "/etc/holdfast/holdfast.toml"]
