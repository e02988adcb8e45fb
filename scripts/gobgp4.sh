#!/usr/bin/env bash
# GoBGP v4 (gobgpd and the gobgp CLI), built from its Go module at the
# version tools/gobgp4/go.mod pins: the BGP speaker Talos embeds
# (BGPInstanceConfig), which tests/talos_native.rs stands up beside
# holdfast. Debian's gobgpd is 3.x; the other GoBGP tests use that one.
#
#   scripts/gobgp4.sh
#
# builds both once into target/tools/gobgp4/ (or $CARGO_TARGET_DIR/tools/
# gobgp4/; rebuilt only when absent or when tools/gobgp4/go.mod or go.sum
# changes) and prints that directory. The test finds it the same way, or
# through HOLDFAST_GOBGP4_DIR.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/tools/gobgp4
out=${CARGO_TARGET_DIR:-$root/target}/tools/gobgp4
command -v go >/dev/null || { echo "gobgp4.sh: go is missing: install Go $(sed -n 's/^go //p' "$src/go.mod") or newer" >&2; exit 1; }
stamp=$(cat "$src/go.mod" "$src/go.sum" | sha256sum | cut -d' ' -f1)
if [ ! -x "$out/gobgpd" ] || [ ! -x "$out/gobgp" ] || [ "$(cat "$out/stamp" 2>/dev/null)" != "$stamp" ]; then
    version=$(cd "$src" && go list -m -f '{{.Version}}' github.com/osrg/gobgp/v4)
    echo "gobgp4.sh: building gobgpd and gobgp $version into $out (cached there)" >&2
    mkdir -p "$out"
    rm -f "$out/stamp"
    for cmd in gobgpd gobgp; do
        (cd "$src" && go build -mod=readonly -ldflags "-s -w" -o "$out/$cmd" "github.com/osrg/gobgp/v4/cmd/$cmd")
    done
    echo "$version" >"$out/version"
    echo "$stamp" >"$out/stamp"
fi
echo "$out"
