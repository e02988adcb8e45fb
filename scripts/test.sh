#!/usr/bin/env bash
# Runs every test of holdfast, on a fresh Debian 12 machine as root:
# installs what the tests need, then format, lint, unit, property, corpus,
# interop (real FRR/BIRD/GoBGP/ExaBGP in network namespaces) and
# Kubernetes tests (a real kube-apiserver and etcd built from their Go
# modules, and kube-standin for the faults a real server cannot show), the
# Helm chart, and the static (musl) build of the Dockerfile.
#
# As root (prefix sudo if you are not root):
#   scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n=== %s\n' "$*"; }

if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/test.sh: the interop tests create network namespaces: run it as root" >&2
  exit 1
fi

# Everything below runs cargo as root (the interop tests need it). Under
# sudo, PATH is sudo's own and has no ~/.cargo/bin: say so instead of
# failing halfway with "cargo: command not found".
command -v cargo >/dev/null && command -v rustup >/dev/null || {
  echo "scripts/test.sh: cargo and rustup are not on root's PATH (sudo resets PATH): install Rust for root (https://rustup.rs) or put them on its PATH" >&2
  exit 1
}

# The Kubernetes tests run a real kube-apiserver and etcd, the chart's
# tests helm, and tests/talos_native.rs GoBGP v4 (Talos's embedded BGP
# speaker; Debian ships GoBGP 3), all built from their Go modules
# (scripts/kube-api.sh, scripts/helm.sh, scripts/gobgp4.sh; Go is on the
# machines this runs on, from go.dev, not Debian). The tests run against
# the oldest Kubernetes release holdfast supports; the newest (the
# script's default) is a documented run:
#   HOLDFAST_KUBE_VERSION=1.37.2 cargo test --test kube_frr ...
# The builds (about 10 minutes of CPU when nothing is cached) start now, in
# the background, and fill the time the steps below spend waiting on the
# network, dpkg and single-threaded linking; the tests wait for them.
command -v go >/dev/null || {
  echo "scripts/test.sh: go is missing: install Go $(sed -n 's/^go //p' tools/kube-1.37.2/go.mod) or newer and put it on PATH" >&2
  exit 1
}
export HOLDFAST_KUBE_VERSION=${HOLDFAST_KUBE_VERSION:-1.34.4}
mkdir -p target/tools
(
  set -e
  start=$(date +%s)
  KUBE_API_BUILD_ONLY=1 scripts/kube-api.sh
  HELM_BUILD_ONLY=1 scripts/helm.sh
  scripts/gobgp4.sh
  echo "built in $(( $(date +%s) - start )) s"
) >target/tools/build.log 2>&1 &
go_build=$!

# mdBook renders the documentation (docs/); cargo builds it once into
# ~/.cargo/bin, also in the background.
mdbook_version=0.5.4
(
  set -e
  if [ "$(mdbook --version 2>/dev/null)" != "mdbook v$mdbook_version" ]; then
    cargo install --locked --quiet mdbook --version "$mdbook_version"
  fi
) >target/tools/mdbook.log 2>&1 &
mdbook_build=$!

step "installing test dependencies (Debian packages, rustup targets)"
need=()
for p in frr bird2 gobgpd exabgp pmacct iproute2 musl-tools jq file man-db python3-venv prometheus libcap2-bin \
    gcc-aarch64-linux-gnu libc6-dev-arm64-cross buildah podman skopeo runc uidmap qemu-user-static; do
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
for s in frr bird gobgpd exabgp pmacct prometheus; do
  systemctl disable --now "$s" >/dev/null 2>&1 || true
done
rustup target add x86_64-unknown-linux-musl aarch64-unknown-linux-musl >/dev/null
# The manifest tests render deploy/ with the real `kubectl kustomize`. kubectl
# is preinstalled on the machines this runs on; it is not a Debian package.
command -v kubectl >/dev/null || {
  echo "scripts/test.sh: kubectl is missing: install kubectl 1.32 or newer (kustomize is built in) and put it on PATH" >&2
  exit 1
}

step "cargo fmt --check"
cargo fmt --all -- --check

step "the layers import only what scripts/deps.sh allows (ARCHITECTURE.md)"
bash scripts/deps.sh

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "the rendered manifests against Kubernetes 1.32's schemas (kubernetes-validate, strict)"
# Offline: the package carries the schemas. In a venv under target/, so the
# system's Python stays as it is.
[ -x target/kubernetes-validate/bin/kubernetes-validate ] || {
  python3 -m venv target/kubernetes-validate
  target/kubernetes-validate/bin/pip install --quiet kubernetes-validate
}
# The cluster part, its monitoring part, and every rack (each renders only
# its own objects; the base is in every rack). Kinds the schemas do not
# know (PodMonitor, PrometheusRule) are reported and not validated.
for dir in deploy/cluster deploy/cluster/monitoring deploy/overlays/*/; do
  kubectl kustomize "$dir" >target/manifests.yaml
  target/kubernetes-validate/bin/kubernetes-validate --strict --quiet -k 1.32.0 target/manifests.yaml ||
    { echo "$dir does not validate against Kubernetes 1.32" >&2; exit 1; }
done
# The control-plane VIP's static pod, as a v1 Pod; and the Talos patch's
# pod (machine.pods), which must be that pod but for its hostPath volumes,
# with machine.files carrying deploy/control-plane's config and VIP file
# as they are (docs/src/install/control-plane.md).
target/kubernetes-validate/bin/kubernetes-validate --strict --quiet -k 1.32.0 deploy/control-plane/static-pod.yaml ||
  { echo "deploy/control-plane/static-pod.yaml does not validate as a v1 Pod" >&2; exit 1; }
target/kubernetes-validate/bin/python - deploy/control-plane deploy/talos/control-plane.yaml target/talos-control-plane-pod.yaml <<'PY'
import copy, sys, yaml
src, patch_path, out = sys.argv[1:]
patch = yaml.safe_load(open(patch_path))
[pod] = patch["machine"]["pods"]
yaml.safe_dump(pod, open(out, "w"))
static = yaml.safe_load(open(f"{src}/static-pod.yaml"))
volumes = lambda p: {v["name"]: v for v in p["spec"]["volumes"]}
paths = {n: v.get("hostPath", {}).get("path") for n, v in volumes(pod).items()}
if paths != {"config": "/var/lib/holdfast", "kubernetes-ca": "/var/lib/holdfast/kubernetes-ca.crt", "state": None}:
    sys.exit(f"{patch_path}: the pod's volumes are not the expected hostPaths: {paths}")
a, b = copy.deepcopy(pod), copy.deepcopy(static)
for p in (a, b):
    for v in p["spec"]["volumes"]:
        v.get("hostPath", {}).pop("path", None)
if a != b:
    sys.exit(f"{patch_path}: machine.pods differs from {src}/static-pod.yaml beyond its hostPath volumes")
files = {f["path"]: f["content"] for f in patch["machine"]["files"]}
for name in ("holdfast.toml", "vips.toml"):
    if files.get(f"/var/lib/holdfast/{name}") != open(f"{src}/{name}").read():
        sys.exit(f"{patch_path}: /var/lib/holdfast/{name} differs from {src}/{name}")
print(f"{patch_path}: the static pod of {src}, its config and VIP file")
PY
target/kubernetes-validate/bin/kubernetes-validate --strict --quiet -k 1.32.0 target/talos-control-plane-pod.yaml ||
  { echo "deploy/talos/control-plane.yaml: machine.pods[0] does not validate as a v1 Pod" >&2; exit 1; }

step "the release (scripts/release.sh): static binaries for x86_64 and aarch64, the OCI image, the SBOM"
# Its x86_64 binary is the static build every later step uses (the lab
# demo, the image tests in tests/release.rs, which read dist/).
scripts/release.sh
bin=target/x86_64-unknown-linux-musl/release/holdfast
file "$bin" | grep -Eq 'static-pie linked' || { file "$bin"; echo "holdfast is not a static PIE (no ASLR, or not static)" >&2; exit 1; }
# Position-independent: the kernel loads the image at a random address
# (ASLR) on every start. Two starts must see it mapped at different ones.
readelf -hW "$bin" | grep -q 'Type: *DYN' || { echo "holdfast is not position-independent (ELF type is not DYN)" >&2; exit 1; }
image_base() { # where the kernel mapped binary $1 in one run of `decode` (waiting on stdin)
  local exe pid b=""
  exe=$(readlink -f "$1")
  sleep 30 | "$1" decode >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 100); do
    b=$(awk -v p="$exe" '$6 == p { print $1; exit }' "/proc/$pid/maps" 2>/dev/null) && [ -n "$b" ] && break
    sleep 0.05
  done
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
  echo "${b%%-*}"
}
aslr() {
  [ "$(cat /proc/sys/kernel/randomize_va_space)" != 0 ] || { echo "kernel.randomize_va_space is 0: ASLR cannot be checked" >&2; exit 1; }
  local one two
  one=$(image_base "$1"); two=$(image_base "$1")
  [ -n "$one" ] && [ -n "$two" ] || { echo "could not read where $1 is mapped" >&2; exit 1; }
  [ "$one" != "$two" ] || { echo "$1 was mapped at $one twice: no address randomisation" >&2; exit 1; }
  echo "$1: image at $one, then $two (ASLR)"
}
aslr "$bin"
"$bin" --version
size=$(stat -c %s "$bin")
echo "static binary: $size bytes (the whole image: FROM scratch)"
[ "$size" -le $((15 * 1024 * 1024)) ] || { echo "holdfast is over the 15 MB image budget" >&2; exit 1; }
# The functions normal operation runs sit together at the start of the code
# (link/hot-text.ld, docs/src/development/build-internals.md). A script that no longer names them
# (regenerate it: scripts/hot-text.sh) leaves them scattered, 2 MiB more RSS.
hot=$(readelf -SW "$bin" | sed -n 's/.*\.text\.holdfast_hot *PROGBITS *[0-9a-f]* [0-9a-f]* \([0-9a-f]*\) .*/\1/p')
echo "hot code packed together: $((16#${hot:-0})) bytes"
[ "$((16#${hot:-0}))" -ge $((1024 * 1024)) ] || { echo "under 1 MiB of holdfast's code matches link/hot-text.ld: regenerate it (scripts/hot-text.sh)" >&2; exit 1; }

step "the release is reproducible: a second run gives the same sums"
cp dist/SHA256SUMS target/SHA256SUMS.first
scripts/release.sh >/dev/null
diff -u target/SHA256SUMS.first dist/SHA256SUMS || { echo "two runs of scripts/release.sh on one commit differ" >&2; exit 1; }

step "the SBOM against the CycloneDX 1.5 schema (cyclonedx-python-lib, offline)"
[ -x target/cyclonedx/bin/python ] || {
  python3 -m venv target/cyclonedx
  target/cyclonedx/bin/pip install --quiet 'cyclonedx-python-lib[json-validation]>=8,<12'
}
target/cyclonedx/bin/python - dist/holdfast-*.cdx.json <<'PY'
import sys
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
path = sys.argv[1]
errors = JsonStrictValidator(SchemaVersion.V1_5).validate_str(open(path).read())
if errors:
    sys.exit(f"{path}: not a valid CycloneDX 1.5 document: {errors}")
print(f"{path}: valid CycloneDX 1.5")
PY

step "the aarch64 build's unit tests under qemu-user (qemu-aarch64-static)"
# Two tests ask the kernel for what qemu-user does not emulate, and run on
# the host as every other test does: /proc/self/stat's CPU time and RSS
# (qemu reports 0) and the IPV6_MINHOPCOUNT socket option (qemu answers
# "Protocol not available").
CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_RUNNER=qemu-aarch64-static \
  cargo test --locked --target aarch64-unknown-linux-musl -p holdfast -p bgp-proto -p holdfast-sockopt --lib -- \
  --skip api::process::tests::this_process_reads_plausibly \
  --skip bfd::driver::tests::a_flood_toward_one_session_is_bounded_and_spares_the_others

step "kube-apiserver $HOLDFAST_KUBE_VERSION, etcd, helm and GoBGP v4, built from their Go modules (started at the beginning)"
wait "$go_build" || { cat target/tools/build.log; echo "building kube-apiserver, etcd, helm or GoBGP v4 failed (above)" >&2; exit 1; }
tail -1 target/tools/build.log

step "the documentation: mdbook build docs (tests/docs.rs checks its configs, commands and links)"
wait "$mdbook_build" || { cat target/tools/mdbook.log; echo "installing mdbook $mdbook_version failed (above)" >&2; exit 1; }
mdbook build docs
[ -s target/book/index.html ] || { echo "mdbook build docs wrote no target/book/index.html" >&2; exit 1; }

step "the Helm chart: helm lint --strict, helm template (tests/helm_chart.rs compares it with kustomize)"
scripts/helm.sh lint --strict deploy/helm/holdfast
scripts/helm.sh template holdfast deploy/helm/holdfast --namespace holdfast >/dev/null

step "cargo test --workspace (the Kubernetes tests against kube-apiserver $HOLDFAST_KUBE_VERSION)"
cargo test --workspace --no-fail-fast

step "the deterministic simulation of a node, optimised (docs/src/development/simulation.md)"
# cargo test runs it above in the debug build on a few seeds; here the
# release build runs the default wide sweep (millions of events). A
# violation prints its seed and the shrunk events that still fail.
cargo test --release --locked --test simulation -- --nocapture 2>&1 | tee target/simulation.log
grep -q '^simulation: .* 0 violations' target/simulation.log ||
  { echo "the simulation printed no clean summary line" >&2; exit 1; }

step "the benchmark harness (bench/, its own workspace): clippy -D warnings and its unit tests"
(cd bench && CARGO_TARGET_DIR=../target cargo clippy --locked --all-targets -- -D warnings &&
  CARGO_TARGET_DIR=../target cargo test --locked)

step "glibc build (docs/src/install/build.md: cargo build-holdfast)"
cargo build-holdfast --locked
gbin=target/x86_64-unknown-linux-gnu/release/holdfast
# glibc linked in: no program interpreter, no shared library (a dynamic
# one keeps 1.6 MiB more resident, docs/src/development/build-internals.md).
links=$(readelf -lW "$gbin" | grep INTERP; readelf -dW "$gbin" | grep NEEDED) || true
[ -z "$links" ] || { echo "$links"; echo "$gbin is not linked statically" >&2; exit 1; }
readelf -hW "$gbin" | grep -q 'Type: *DYN' || { echo "$gbin is not position-independent (ELF type is not DYN)" >&2; exit 1; }
aslr "$gbin"
"$gbin" --version
"$gbin" check --config config/rack-a.toml --skip-password-files >/dev/null

step "the lab demo (README.md's quick start), then lab.sh down"
# The static binary stands in for target/release/holdfast, which lab.sh
# would otherwise build. A lab left up (by the quick start, say) runs some
# other binary: it is taken down first, so the demo builds a fresh lab with
# this one. down must leave nothing behind.
trap 'frr-lab/lab.sh down >/dev/null 2>&1 || true' EXIT
frr-lab/lab.sh down
HOLDFAST_BIN="$bin" frr-lab/lab.sh demo
frr-lab/lab.sh down
trap - EXIT
if ip netns list | grep -q '^hflab-' || [ -e /run/holdfast-lab ]; then
  echo "lab.sh down left namespaces or /run/holdfast-lab behind" >&2
  exit 1
fi

step "all tests passed"
