#!/usr/bin/env bash
# helm, built from its Go module at the version tools/helm/go.mod pins
# (cached under target/tools/helm/, rebuilt only when absent or when
# tools/helm/go.mod or go.sum changes), then run with the arguments given:
#
#   scripts/helm.sh lint deploy/helm/holdfast
#   scripts/helm.sh template holdfast deploy/helm/holdfast -n holdfast -f my-values.yaml
#
# HELM_BUILD_ONLY=1: build, print the binary's path, exit.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/tools/helm
out=${CARGO_TARGET_DIR:-$root/target}/tools/helm
command -v go >/dev/null || { echo "helm.sh: go is missing: install Go $(sed -n 's/^go //p' "$src/go.mod") or newer" >&2; exit 1; }
stamp=$(cat "$src/go.mod" "$src/go.sum" | sha256sum | cut -d' ' -f1)
if [ ! -x "$out/helm" ] || [ "$(cat "$out/stamp" 2>/dev/null)" != "$stamp" ]; then
    echo "helm.sh: building helm into $out (cached there)" >&2
    mkdir -p "$out"
    rm -f "$out/stamp"
    version=$(cd "$src" && go list -m -f '{{.Version}}' helm.sh/helm/v4)
    (cd "$src" && go build -mod=readonly \
        -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$version" \
        -o "$out/helm" helm.sh/helm/v4/cmd/helm)
    echo "$stamp" >"$out/stamp"
fi
if [ "${HELM_BUILD_ONLY:-}" = 1 ]; then
    echo "$out/helm"
    exit 0
fi
# Helm's own state (repositories, cache) stays out of the user's home.
export HELM_CONFIG_HOME=$out/config HELM_CACHE_HOME=$out/cache HELM_DATA_HOME=$out/data
exec "$out/helm" "$@"
