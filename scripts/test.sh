#!/usr/bin/env bash
# Runs every test of holdfast, on a fresh Debian 12 machine as root:
# installs what the tests need, then format, lint, unit, property, corpus,
# interop (real FRR/BIRD/GoBGP/ExaBGP in network namespaces) and
# Kubernetes-stand-in tests, and the static (musl) build of the Dockerfile.
#
#   sudo scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n=== %s\n' "$*"; }

if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/test.sh: the interop tests create network namespaces: run as root (sudo scripts/test.sh)" >&2
  exit 1
fi

step "installing test dependencies (Debian packages, rustup targets)"
need=()
for p in frr bird2 gobgpd exabgp iproute2 musl-tools jq file prometheus; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}"
fi
# The packages' own services are not wanted: tests start their daemons in
# namespaces, and prometheus is installed for promtool only (tests/
# monitoring.rs); its server must not run. (On machines without systemd
# these are no-ops.)
for s in frr bird gobgpd exabgp prometheus; do
  systemctl disable --now "$s" >/dev/null 2>&1 || true
done
rustup target add x86_64-unknown-linux-musl >/dev/null

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo test --workspace"
cargo test --workspace

step "static build (what the Dockerfile runs)"
cargo build --release --target x86_64-unknown-linux-musl --bin holdfast
bin=target/x86_64-unknown-linux-musl/release/holdfast
file "$bin" | grep -Eq 'static(-pie)? linked|statically linked' || { file "$bin"; echo "holdfast is not statically linked" >&2; exit 1; }
"$bin" --version
size=$(stat -c %s "$bin")
echo "static binary: $size bytes (the whole image: FROM scratch)"
[ "$size" -le $((15 * 1024 * 1024)) ] || { echo "holdfast is over the 15 MB image budget" >&2; exit 1; }

step "the lab demo (the README's quick start), then lab.sh down"
# The static binary stands in for target/release/holdfast, which lab.sh
# would otherwise build. down must leave nothing behind.
trap 'frr-lab/lab.sh down >/dev/null 2>&1 || true' EXIT
HOLDFAST_BIN="$bin" frr-lab/lab.sh demo
frr-lab/lab.sh down
trap - EXIT
if ip netns list | grep -q '^hflab-' || [ -e /run/holdfast-lab ]; then
  echo "lab.sh down left namespaces or /run/holdfast-lab behind" >&2
  exit 1
fi

step "all tests passed"
