#!/usr/bin/env bash
# A real Kubernetes API server (kube-apiserver and etcd of a pinned
# release, built from their Go modules) for holdfast's tests, and for
# trying holdfast on a laptop without a cluster:
#
#   scripts/kube-api.sh DIR
#
# builds the two binaries if needed (under target/tools/kube-VERSION/,
# rebuilt only when absent or when tools/kube-VERSION/go.mod or go.sum
# changes), makes a CA and certificates in DIR, starts etcd and
# kube-apiserver on 127.0.0.1 of the network namespace it runs in (RBAC
# and Node authorizers, a service-account issuer, NodeRestriction), applies
# deploy/cluster (the namespace, the BGPNodeStatus CRD, the holdfast
# ServiceAccount and its ClusterRole and binding, rendered by kubectl
# kustomize: nothing more), and writes
#
#   DIR/admin.kubeconfig      system:masters, for kubectl and tests
#   DIR/holdfast.kubeconfig   a token of the holdfast ServiceAccount, as the
#                             DaemonSet's pods have it
#
# then prints "ready" and runs until SIGTERM or SIGINT, which stop both.
# No controller manager, scheduler or kubelet runs: EndpointSlices and
# Nodes are whatever you create (holdfast runs as a process with
# KUBECONFIG and NODE_NAME, not in a pod).
#
# Environment:
#   HOLDFAST_KUBE_VERSION   the release, one of tools/kube-*/ (default below)
#   KUBE_API_PORT           the API's HTTPS port (6443)
#   ETCD_PORT               etcd's client port (2379); the peer port is
#   ETCD_PEER_PORT          ETCD_PEER_PORT (2380)
#   KUBE_API_BUILD_ONLY=1   build the binaries, print their directory, exit
#
# Signals, for tests of outages:
#   SIGUSR1  stops kube-apiserver (connections are refused; etcd keeps the
#            data) and prints "stopped"
#   SIGUSR2  stops kube-apiserver if it runs, compacts etcd to a revision
#            newer than any a client holds, starts kube-apiserver again
#            and prints "ready": a watch resumed from before gets 410 Gone
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

# The newest release holdfast supports; CI (scripts/test.sh) sets the
# oldest, 1.34.4. Each has its module pins in tools/kube-VERSION/.
version=${HOLDFAST_KUBE_VERSION:-1.37.2}
api_port=${KUBE_API_PORT:-6443}
etcd_port=${ETCD_PORT:-2379}
peer_port=${ETCD_PEER_PORT:-2380}

die() { echo "kube-api.sh: $*" >&2; exit 1; }

src=$root/tools/kube-$version
[ -f "$src/go.mod" ] || die "no pinned modules for Kubernetes $version (tools/kube-$version/go.mod); have: $(cd "$root/tools" && ls -d kube-* | tr '\n' ' ')"
command -v go >/dev/null || die "go is missing: install Go $(sed -n 's/^go //p' "$src/go.mod") or newer"

out=${CARGO_TARGET_DIR:-$root/target}/tools/kube-$version
stamp=$(cat "$src/go.mod" "$src/go.sum" | sha256sum | cut -d' ' -f1)
if [ ! -x "$out/kube-apiserver" ] || [ ! -x "$out/etcd" ] || [ "$(cat "$out/stamp" 2>/dev/null)" != "$stamp" ]; then
    echo "kube-api.sh: building kube-apiserver and etcd $version into $out (cached there)" >&2
    mkdir -p "$out"
    rm -f "$out/stamp"
    IFS=. read -r major minor _ <<<"$version"
    pkg=k8s.io/component-base/version
    # The version the server reports (/version, kubectl's skew warning);
    # a plain go build leaves it at v0.0.0.
    ldflags="-s -w -X $pkg.gitVersion=v$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
    (cd "$src" && go build -mod=readonly -ldflags "$ldflags" -o "$out/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver)
    (cd "$src" && go build -mod=readonly -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3)
    echo "$stamp" >"$out/stamp"
fi
if [ "${KUBE_API_BUILD_ONLY:-}" = 1 ]; then
    echo "$out"
    exit 0
fi

[ $# -eq 1 ] || die "usage: scripts/kube-api.sh DIR"
command -v kubectl >/dev/null || die "kubectl is missing (it applies deploy/cluster and makes the token)"
command -v openssl >/dev/null || die "openssl is missing (it makes the certificates)"
command -v curl >/dev/null || die "curl is missing (it compacts etcd)"
mkdir -p "$1"
dir=$(cd "$1" && pwd)
pki=$dir/pki
mkdir -p "$pki"

# The certificates: one CA signs the serving certificate and the admin's
# client certificate; the service-account tokens have their own key.
cert() { # name subject extensions
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout "$pki/$1.key" -out "$pki/$1.csr" -subj "$2" 2>/dev/null
    printf '%s\n' "$3" >"$pki/$1.ext"
    openssl x509 -req -in "$pki/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
        -days 3650 -extfile "$pki/$1.ext" -out "$pki/$1.crt" 2>/dev/null
}
if [ ! -f "$pki/admin.crt" ]; then
    openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout "$pki/ca.key" -out "$pki/ca.crt" -days 3650 -subj "/CN=holdfast-test-ca" 2>/dev/null
    cert apiserver "/CN=kube-apiserver" \
        "subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc
extendedKeyUsage=serverAuth"
    cert admin "/O=system:masters/CN=holdfast-admin" "extendedKeyUsage=clientAuth"
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$pki/sa.key" 2>/dev/null
    openssl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
fi

b64() { base64 -w0 <"$1"; }
server=https://127.0.0.1:$api_port
kubeconfig() { # file user-fields
    cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: holdfast-test
  cluster:
    server: $server
    certificate-authority-data: $(b64 "$pki/ca.crt")
users:
- name: user
  user:
$2
contexts:
- name: holdfast-test
  context:
    cluster: holdfast-test
    user: user
current-context: holdfast-test
EOF
}
kubeconfig "$dir/admin.kubeconfig" "    client-certificate-data: $(b64 "$pki/admin.crt")
    client-key-data: $(b64 "$pki/admin.key")"
admin() { kubectl --kubeconfig "$dir/admin.kubeconfig" --cache-dir "$dir/kubectl-cache" "$@"; }

etcd_pid=
api_pid=
stopping=
# kube-apiserver is killed, not asked to stop: a graceful stop waits up to
# a minute for the watches its clients hold, and an outage is abrupt.
stop_all() {
    [ -n "$api_pid" ] && kill -KILL "$api_pid" 2>/dev/null && wait "$api_pid" 2>/dev/null
    [ -n "$etcd_pid" ] && kill "$etcd_pid" 2>/dev/null && wait "$etcd_pid" 2>/dev/null
    return 0
}
trap 'stopping=1; stop_all; exit 0' TERM INT
trap stop_all EXIT

"$out/etcd" --name holdfast-test --data-dir "$dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "holdfast-test=http://127.0.0.1:$peer_port" \
    --unsafe-no-fsync --log-level warn >"$dir/etcd.log" 2>&1 &
etcd_pid=$!

start_api() {
    # --endpoint-reconciler-type=none: the "kubernetes" Service's endpoint
    # would be 127.0.0.1, which EndpointSlices may not hold.
    # --etcd-compaction-interval=0: compaction happens when asked (SIGUSR2).
    "$out/kube-apiserver" \
        --etcd-servers "http://127.0.0.1:$etcd_port" --etcd-compaction-interval 0 \
        --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
        --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
        --client-ca-file "$pki/ca.crt" \
        --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
        --service-account-issuer https://kubernetes.default.svc.cluster.local \
        --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
        --service-cluster-ip-range 10.96.0.0/16 --endpoint-reconciler-type none \
        --cert-dir "$dir/pki" --profiling=false \
        >>"$dir/kube-apiserver.log" 2>&1 &
    api_pid=$!
    echo "$api_pid" >"$dir/kube-apiserver.pid"
}

wait_ready() {
    local i
    for i in $(seq 1 600); do
        if [ -n "$stopping" ]; then exit 0; fi
        kill -0 "$api_pid" 2>/dev/null || {
            tail -20 "$dir/kube-apiserver.log" >&2
            die "kube-apiserver exited (log: $dir/kube-apiserver.log)"
        }
        if [ "$(admin get --raw /readyz 2>/dev/null)" = ok ]; then return 0; fi
        sleep 0.2
    done
    die "kube-apiserver not ready after 120 s (log: $dir/kube-apiserver.log)"
}

compact() {
    # A write outside /registry makes a revision newer than any a client
    # of the API holds; compacting to it drops everything older.
    local e=http://127.0.0.1:$etcd_port rev
    rev=$(curl -sf -X POST "$e/v3/kv/put" -d '{"key":"L2hvbGRmYXN0LXRlc3QvY29tcGFjdA==","value":"MQ=="}' |
        grep -o '"revision":"[0-9]*"' | grep -o '[0-9]*')
    curl -sf -X POST "$e/v3/kv/compaction" -d "{\"revision\":\"$rev\",\"physical\":true}" >/dev/null
    echo "compacted $rev"
}

start_api
wait_ready
# What the shipped manifests give holdfast in a cluster, and nothing else.
kubectl kustomize "$root/deploy/cluster" >"$dir/cluster.yaml"
admin apply --server-side -f "$dir/cluster.yaml" >/dev/null
admin wait --for condition=established --timeout 60s crd/bgpnodestatuses.holdfast.dev >/dev/null
token=$(admin -n holdfast create token holdfast --duration 720h)
kubeconfig "$dir/holdfast.kubeconfig" "    token: $token"
echo ready

outage=
restart=
trap 'outage=1' USR1
trap 'restart=1' USR2
while :; do
    # Returns when a child exits or a trapped signal arrives.
    wait -n || true
    if [ -n "$outage" ]; then
        outage=
        if [ -n "$api_pid" ]; then
            kill -KILL "$api_pid" 2>/dev/null || true
            wait "$api_pid" 2>/dev/null || true
            api_pid=
        fi
        echo stopped
    fi
    if [ -n "$restart" ]; then
        restart=
        if [ -n "$api_pid" ]; then
            kill -KILL "$api_pid" 2>/dev/null || true
            wait "$api_pid" 2>/dev/null || true
        fi
        compact
        start_api
        wait_ready
        echo ready
    fi
    kill -0 "$etcd_pid" 2>/dev/null || { tail -20 "$dir/etcd.log" >&2; die "etcd exited (log: $dir/etcd.log)"; }
    if [ -n "$api_pid" ] && ! kill -0 "$api_pid" 2>/dev/null; then
        tail -20 "$dir/kube-apiserver.log" >&2
        die "kube-apiserver exited (log: $dir/kube-apiserver.log)"
    fi
done
