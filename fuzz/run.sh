#!/usr/bin/env bash
# Runs each fuzz target for SECONDS (default 600) with the nightly toolchain,
# starting from the committed seeds. Crashes land in fuzz/artifacts/TARGET/;
# copy each into fuzz/regressions/TARGET/ so that `cargo test` replays it.
#   fuzz/run.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}; shift || true
targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=(framing message attributes session)
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
for t in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$t"
  cargo +nightly fuzz run "$t" "fuzz/corpus/$t" "fuzz/seeds/$t" -- -max_total_time="$secs" -print_final_stats=1
done
