#!/usr/bin/env bash
# Builds holdfast's release from the commit checked out, with no registry,
# into dist/ (or --out DIR), as root on Debian 12 (installs what it needs):
#
#   holdfast-VERSION-x86_64-unknown-linux-musl    static PIE, amd64
#   holdfast-VERSION-aarch64-unknown-linux-musl   static PIE, arm64 (cross-built)
#   holdfast-VERSION-oci.tar    OCI image archive: one index, linux/amd64 and
#                               linux/arm64, FROM scratch, UID 65532
#   holdfast-VERSION.cdx.json   CycloneDX SBOM of what the binaries link
#   SHA256SUMS
#
#   scripts/release.sh [--out DIR]
#
# Reproducible: every date in the artefacts is SOURCE_DATE_EPOCH (the
# commit's time unless set), so two runs on one commit give identical sums.
# The image is built with buildah from the binaries above in a private,
# throw-away storage; the Dockerfile is the registry path to the same image
# (tests/release.rs compares the two). Loading it: `podman load -i
# holdfast-VERSION-oci.tar`, or `skopeo copy oci-archive:holdfast-VERSION-oci.tar
# docker://REGISTRY/holdfast:VERSION` (both architectures with --all).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=dist
while [ $# -gt 0 ]; do
    case $1 in
        --out) out=$2; shift 2 ;;
        *) echo "usage: scripts/release.sh [--out DIR]" >&2; exit 2 ;;
    esac
done

if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/release.sh: run it as root (it installs packages; buildah stores images as root)" >&2
    exit 1
fi
step() { printf '\n=== release: %s\n' "$*"; }

step "tools (Debian packages, rustup targets)"
need=()
for p in musl-tools gcc-aarch64-linux-gnu libc6-dev-arm64-cross buildah libcap2-bin jq python3; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}"
fi
rustup target add x86_64-unknown-linux-musl aarch64-unknown-linux-musl >/dev/null

version=$(cargo metadata --locked --no-deps --format-version 1 |
    jq -r '.packages[] | select(.name == "holdfast") | .version')
commit=$(git rev-parse HEAD)
if ! git diff --quiet HEAD -- 2>/dev/null; then
    echo "warning: the checkout has uncommitted changes: the binaries say ${commit}-dirty" >&2
    commit=$commit-dirty
fi
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
# Where the source is published (the image's `source` label, the SBOM):
# $HOLDFAST_SOURCE_URL, else the `origin` remote when it is a URL.
source_url=${HOLDFAST_SOURCE_URL:-$(git remote get-url origin 2>/dev/null || true)}
case $source_url in
    https://* | http://* | git@* | ssh://*) ;;
    *)
        echo "warning: no public source URL (origin is '${source_url:-none}'): set HOLDFAST_SOURCE_URL; the label says unknown" >&2
        source_url=unknown
        ;;
esac
echo "holdfast $version, commit $commit, dated $created"

# The binaries: the same `cargo build` as scripts/test.sh's static build
# (one build serves both). aarch64's C compiler and linker are named in
# .cargo/config.toml (Debian's cross gcc; scripts/static-pie-cc keeps it a
# static PIE).
declare -A arch_of=([x86_64-unknown-linux-musl]=amd64 [aarch64-unknown-linux-musl]=arm64)
triples=(x86_64-unknown-linux-musl aarch64-unknown-linux-musl)
for t in "${triples[@]}"; do
    step "cargo build --release --target $t"
    cargo build --locked --release --target "$t" --bin holdfast
    file "target/$t/release/holdfast" | grep -q 'static-pie linked' || {
        file "target/$t/release/holdfast"
        echo "target/$t/release/holdfast is not a static PIE" >&2
        exit 1
    }
done

rm -rf "$out"
mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/holdfast-release.XXXXXX")
bah() { buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs "$@"; }
cleanup() {
    # vfs layers are plain directories; buildah's mounts are gone with it.
    bah rm --all >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

step "binaries"
for t in "${triples[@]}"; do
    install -m 0755 "target/$t/release/holdfast" "$out/holdfast-$version-$t"
    touch -d "@$SOURCE_DATE_EPOCH" "$out/holdfast-$version-$t"
done

step "OCI image (linux/amd64, linux/arm64) with buildah"
# What each image holds: the binary, with NET_RAW and NET_BIND_SERVICE as
# file capabilities in the permitted set only (no effective bit). Under the
# base DaemonSet (every capability dropped, no_new_privs) they grant
# nothing; an overlay that keeps one in the bounding set and allows
# privilege escalation lets the one thread that needs it raise it (docs/src/install/port-179.md:
# Unnumbered peering, Listening on port 179). The Dockerfile does the same.
labels=(
    --label "org.opencontainers.image.title=holdfast"
    --label "org.opencontainers.image.description=A BGP speaker for Kubernetes nodes that keeps Service VIP routes steady"
    --label "org.opencontainers.image.licenses=Apache-2.0"
    --label "org.opencontainers.image.version=$version"
    --label "org.opencontainers.image.revision=$commit"
    --label "org.opencontainers.image.source=$source_url"
    --label "org.opencontainers.image.created=$created"
)
bah manifest create "holdfast:$version" >/dev/null
for t in "${triples[@]}"; do
    arch=${arch_of[$t]}
    mkdir -p "$work/$arch"
    install -m 0755 "target/$t/release/holdfast" "$work/$arch/holdfast"
    setcap cap_net_raw,cap_net_bind_service+p "$work/$arch/holdfast"
    ctr=$(bah from --arch "$arch" scratch)
    bah copy --quiet --chmod 0755 "$ctr" "$work/$arch/holdfast" /usr/local/bin/holdfast
    bah config --os linux --arch "$arch" \
        --user 65532:65532 \
        --entrypoint '["/usr/local/bin/holdfast"]' \
        --cmd '["run", "--config", "/etc/holdfast/holdfast.toml"]' \
        --created-by "scripts/release.sh: COPY holdfast /usr/local/bin/holdfast" \
        "${labels[@]}" "$ctr"
    bah commit --quiet --format oci --identity-label=false --timestamp "$SOURCE_DATE_EPOCH" \
        "$ctr" "holdfast-$arch:$version" >/dev/null
    bah manifest add --os linux --arch "$arch" "holdfast:$version" \
        "containers-storage:localhost/holdfast-$arch:$version" >/dev/null
done
bah manifest push --quiet --all "holdfast:$version" "oci:$work/layout:$version"
index=$(jq -r '.manifests[0].digest' "$work/layout/index.json")
echo "image index $index:"
jq -r '.manifests[] | "  \(.platform.os)/\(.platform.architecture) \(.digest)"' \
    "$work/layout/blobs/${index%%:*}/${index#*:}"
# An OCI archive is the layout as a tar (the oci-archive transport): one
# with fixed order, owners and dates.
tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
    --format=gnu -cf "$out/holdfast-$version-oci.tar" -C "$work/layout" .
touch -d "@$SOURCE_DATE_EPOCH" "$out/holdfast-$version-oci.tar"

step "SBOM (CycloneDX)"
python3 scripts/sbom.py --version "$version" --commit "$commit" --source "$source_url" \
    "${triples[@]}" >"$out/holdfast-$version.cdx.json"
touch -d "@$SOURCE_DATE_EPOCH" "$out/holdfast-$version.cdx.json"

step "SHA256SUMS"
(cd "$out" && sha256sum holdfast-* >SHA256SUMS)
touch -d "@$SOURCE_DATE_EPOCH" "$out/SHA256SUMS"
ls -l "$out"
cat "$out/SHA256SUMS"
