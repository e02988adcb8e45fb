#!/usr/bin/env bash
# The benchmarks (docs/src/development/benchmarks.md): builds the static holdfast (musl, as the Dockerfile does) and the
# harness, runs the codec comparison (criterion), then every lab
# measurement into one FRR bgpd in a network namespace, and writes
# BENCHMARKS.md at the repository root. Needs root (namespaces) and the
# Debian packages frr, bird2, gobgpd, exabgp, tcpdump, musl-tools
# (installed when missing).
#
#   bench/run.sh                       # as root: everything (about 30 minutes)
#   bench/run.sh --sizes 1000,10000    # arguments go to the harness
#
# Harness arguments: --holdfast-glibc BIN  --holdfast-fixed BIN  --sizes N,N  --kube-sizes N,N  --idle-sizes N,N  --idle-secs S
# --churn-secs S  --churn-size N  --trials N  --speakers holdfast,BIRD,...
# --only bulk,idle,churn,latency,kube,traffic,scrapes,keepalive,start,codec  --out FILE
# --scrape-sizes N,N  --scrapes S  --keepalive-secs S  --start-size N  --start-trials T
# --bulk-runs R (default 21: loads of each size by holdfast's builds and the floor; the median counts)
# (--only traffic alone rewrites only the zero-loss section of BENCHMARKS.md)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

if [ "$(id -u)" != 0 ]; then
    echo "bench/run.sh needs root (it creates network namespaces): run it as root" >&2
    exit 1
fi
# The routers, the capture and musl-gcc (the static build's C parts), as
# scripts/test.sh installs them; their own services are not wanted.
need=()
for p in frr bird2 gobgpd exabgp tcpdump iproute2 musl-tools; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}"
fi
for s in frr bird gobgpd exabgp; do
    systemctl disable --now "$s" >/dev/null 2>&1 || true
done
for tool in /usr/lib/frr/bgpd vtysh bird birdc gobgpd gobgp exabgp tcpdump musl-gcc; do
    if ! command -v "$tool" >/dev/null; then
        echo "missing $tool after installing the packages" >&2
        exit 1
    fi
done
if [ ! -d "$root/corpora" ]; then
    echo "missing the codec corpora at $root/corpora" >&2
    exit 1
fi

load=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$load" -v n="$(nproc)" 'BEGIN { exit !(l > n / 2) }'; then
    echo "warning: load average $load on $(nproc) cores; figures will be noisy" >&2
fi

export CARGO_TARGET_DIR="$root/target"
# Both builds the docs offer (docs/src/install/build.md): the static binary the Dockerfile ships (the
# one every section measures) and `cargo build-holdfast` (glibc linked in,
# .cargo/config.toml; the bulk section measures it too).
rustup target add x86_64-unknown-linux-musl >/dev/null
cargo build --locked --release --target x86_64-unknown-linux-musl --bin holdfast
cargo build-holdfast --locked
# The static build linked at a fixed address (no PIE), in its own target
# directory (other flags would rebuild the shipped one): the bulk section
# loads it beside the shipped build to show what ASLR costs in RSS.
CARGO_TARGET_DIR="$root/target/no-pie" cargo build --locked --release --target x86_64-unknown-linux-musl --bin holdfast \
    --config "target.x86_64-unknown-linux-musl.rustflags = ['-C', 'relocation-model=static']"
(cd bench && cargo build --release)

# The codec comparison runs with everything, or when --only names codec.
only=
prev=
for a in "$@"; do
    [ "$prev" = --only ] && only=$a
    case $a in --only=*) echo "write --only LIST, not --only=LIST" >&2; exit 1 ;; esac
    prev=$a
done
criterion=()
if [ -z "$only" ] || [[ ",$only," == *,codec,* ]]; then
    # The codec first, alone on the machine.
    export CRITERION_HOME="$CARGO_TARGET_DIR/criterion"
    (cd bench && cargo bench --bench codec -- --noplot)
    criterion=(--criterion "$CRITERION_HOME")
fi

# A binary just written sits in the page cache in large folios, and a
# fault on one maps more of it: right after its link the static build
# showed 4.7 MiB at 1k VIPs, read back cold 3.6 MiB. Every figure is taken
# from binaries read back cold, as a node that pulled the image reads them.
sync
echo 3 > /proc/sys/vm/drop_caches

command="bench/run.sh${*:+ $*}"
echo "running: $command" >&2
# A later --out in "$@" takes the place of this one.
"$CARGO_TARGET_DIR/release/holdfast-bench" \
    --holdfast "$CARGO_TARGET_DIR/x86_64-unknown-linux-musl/release/holdfast" \
    --holdfast-glibc "$CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/release/holdfast" \
    --holdfast-fixed "$CARGO_TARGET_DIR/no-pie/x86_64-unknown-linux-musl/release/holdfast" \
    "${criterion[@]}" \
    --out "$root/BENCHMARKS.md" \
    --command "$command" \
    "$@"
