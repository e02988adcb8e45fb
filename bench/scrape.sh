#!/usr/bin/env bash
# /metrics under load: holdfast with N VIPs and two Established sessions
# (two neighbors of one FRR bgpd in a network namespace), then S scrapes in
# a row; prints p50, p99 and max of the scrape time, the answer's size and
# holdfast's RSS before and after. No cargo bench, no harness build: give
# it the binary to measure. Needs root and frr.
#
#   bench/scrape.sh target/release/holdfast            # 100000 VIPs, 500 scrapes
#   bench/scrape.sh BIN N S
#   bench/scrape.sh --idle BIN N SECS                  # idle wake-ups instead
#   FRR_TIMERS="30 90" HOLD_TIME=90s KEEPALIVE=30s bench/scrape.sh ...  # other timers (default 3/9 s)
#
# With --idle it counts holdfast's context switches (voluntary and not,
# /proc/PID/status, all threads) over SECS seconds once the routes are in
# FRR and nothing changes: the wake-ups an idle daemon costs.
set -euo pipefail

mode=scrape
if [ "${1:-}" = --idle ]; then
    mode=idle
    shift
fi
bin=$(realpath "${1:?the holdfast binary to measure}")
n=${2:-100000}
if [ "$mode" = idle ]; then count=${3:-30}; else count=${3:-500}; fi

[ "$(id -u)" = 0 ] || { echo "bench/scrape.sh needs root (network namespaces)" >&2; exit 1; }
for tool in /usr/lib/frr/bgpd vtysh curl; do
    command -v "$tool" >/dev/null || { echo "missing $tool: apt-get install frr curl" >&2; exit 1; }
done

tag=hfs$$
rns=$tag-r
nns=$tag-n
dir=$(mktemp -d /tmp/holdfast-scrape.XXXXXX)
cleanup() {
    [ -n "${hpid:-}" ] && kill "$hpid" 2>/dev/null && wait "$hpid" 2>/dev/null || true
    [ -f "$dir/bgpd.pid" ] && kill "$(cat "$dir/bgpd.pid")" 2>/dev/null || true
    ip netns del "$rns" 2>/dev/null || true
    ip netns del "$nns" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$rns"
ip netns add "$nns"
ip link add "$tag-a" netns "$nns" type veth peer name "$tag-b" netns "$rns"
ip -n "$nns" addr add 192.0.2.2/24 dev "$tag-a"
ip -n "$nns" addr add 192.0.2.4/24 dev "$tag-a"
ip -n "$rns" addr add 192.0.2.1/24 dev "$tag-b"
ip -n "$rns" addr add 192.0.2.3/24 dev "$tag-b"
for ns in "$rns" "$nns"; do
    ip -n "$ns" link set lo up
done
ip -n "$nns" link set "$tag-a" up
ip -n "$rns" link set "$tag-b" up

# One FRR, two neighbors: the node's two addresses, one session each.
cat >"$dir/bgpd.conf" <<EOF
frr defaults datacenter
router bgp 65000
 bgp router-id 192.0.2.1
 no bgp ebgp-requires-policy
 no bgp network import-check
 neighbor 192.0.2.2 remote-as 65001
 neighbor 192.0.2.2 timers ${FRR_TIMERS:-3 9}
 neighbor 192.0.2.2 timers connect 1
 neighbor 192.0.2.4 remote-as 65001
 neighbor 192.0.2.4 timers ${FRR_TIMERS:-3 9}
 neighbor 192.0.2.4 timers connect 1
EOF
chown -R frr:frr "$dir" 2>/dev/null || true
ip netns exec "$rns" /usr/lib/frr/bgpd -d -f "$dir/bgpd.conf" -i "$dir/bgpd.pid" \
    -z "$dir/zserv.api" --vty_socket "$dir" -Z -n --log "file:$dir/bgpd.log"

python3 - "$n" >"$dir/vips.toml" <<'EOF'
import sys
n = int(sys.argv[1])
out = []
for i in range(n):
    a = 0xC6120000 + i  # 198.18.0.0/15 (RFC 2544 benchmarking)
    out.append('[[vip]]\naddress = "%d.%d.%d.%d"\n' % (a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255))
sys.stdout.write("".join(out))
EOF
cat >"$dir/holdfast.toml" <<EOF
[speaker]
asn = 65001
router_id = "192.0.2.2"
api = "127.0.0.1:9179"

[[peer]]
name = "tor1"
address = "192.0.2.1"
source_address = "192.0.2.2"
asn = 65000
hold_time = "${HOLD_TIME:-9s}"
keepalive = "${KEEPALIVE:-3s}"
connect_retry = "1s"
families = ["ipv4-unicast"]

[[peer]]
name = "tor2"
address = "192.0.2.3"
source_address = "192.0.2.4"
asn = 65000
hold_time = "${HOLD_TIME:-9s}"
keepalive = "${KEEPALIVE:-3s}"
connect_retry = "1s"
families = ["ipv4-unicast"]

[source]
kind = "file"
path = "$dir/vips.toml"

[[advertisement]]
name = "public"
EOF
ip netns exec "$nns" "$bin" run --config "$dir/holdfast.toml" --state-dir "$dir/state" \
    >"$dir/holdfast.log" 2>&1 &
hpid=$!

metrics() { ip netns exec "$nns" curl -sf http://127.0.0.1:9179/metrics; }
rss() { awk '/^VmRSS/ { print $2 / 1024 " MiB" }' "/proc/$hpid/status"; }
switches() {
    local v=0 nv=0 t
    for t in /proc/"$hpid"/task/*/status; do
        v=$((v + $(awk '/^voluntary_ctxt_switches/ { print $2 }' "$t")))
        nv=$((nv + $(awk '/^nonvoluntary_ctxt_switches/ { print $2 }' "$t")))
    done
    echo "$v $nv"
}

# Both sessions Established and all N routes in both Adj-RIBs-Out.
for _ in $(seq 1 600); do
    got=$(metrics 2>/dev/null | grep -c "^holdfast_peer_prefixes_advertised{.*family=\"ipv4\"} $n\$" || true)
    [ "$got" = 2 ] && break
    sleep 0.5
done
[ "$got" = 2 ] || { echo "the two sessions never held $n routes" >&2; tail -20 "$dir/holdfast.log" >&2; exit 1; }
# FRR has them all (the sessions are idle from here on).
for _ in $(seq 1 600); do
    pfx=$(ip netns exec "$rns" vtysh --vty_socket "$dir" -c "show bgp ipv4 unicast summary json" 2>/dev/null |
        python3 -c 'import json,sys; j=json.load(sys.stdin); p=j.get("ipv4Unicast", j)["peers"]; print(min(v.get("pfxRcd",0) for v in p.values()))' 2>/dev/null || echo 0)
    [ "$pfx" = "$n" ] && break
    sleep 0.5
done
[ "$pfx" = "$n" ] || { echo "FRR never held $n routes from both sessions" >&2; exit 1; }
sleep 2

echo "binary: $bin"
echo "VIPs: $n, peers: 2 Established, load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
per_thread() {
    local t
    for t in /proc/"$hpid"/task/*; do
        echo "${t##*/} $(cat "$t/comm") $(awk '/ctxt_switches/ { s += $2 } END { print s }' "$t/status")"
    done
}
if [ "$mode" = idle ]; then
    per_thread >"$dir/threads.0"
    read -r v0 nv0 < <(switches)
    sleep "$count"
    read -r v1 nv1 < <(switches)
    per_thread >"$dir/threads.1"
    # Which threads woke (threads that came and went count as new).
    join -a 2 "$dir/threads.0" "$dir/threads.1" | awk '{
        if (NF == 5) d = $5 - $3; else d = $3
        if (d > 0) printf "  thread %s %s: %d switches\n", $1, (NF == 5 ? $4 : $2), d }'
    awk -v v=$((v1 - v0)) -v nv=$((nv1 - nv0)) -v s="$count" 'BEGIN {
        printf "idle %ds: %d voluntary + %d involuntary context switches = %.2f wake-ups/s\n", s, v, nv, (v + nv) / s }'
    exit 0
fi
echo "RSS before the scrapes: $(rss)"
size=$(metrics | wc -c)
for _ in $(seq 1 "$count"); do
    ip netns exec "$nns" curl -sf -o /dev/null -w '%{time_total}\n' http://127.0.0.1:9179/metrics
done | sort -n | awk -v size="$size" '{ t[NR] = $1 * 1000 } END {
    p50 = t[int(NR * 0.50 + 0.5)]; p99 = t[int(NR * 0.99 + 0.5)];
    printf "/metrics x%d (%d bytes): p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", NR, size, p50, p99, t[NR] }'
echo "RSS after the scrapes: $(rss)"
