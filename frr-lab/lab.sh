#!/usr/bin/env bash
# The holdfast lab on any Linux host, with network namespaces and Debian's
# FRR: two top-of-rack routers (FRR: zebra + bgpd) and two nodes running
# holdfast with VIPs from a file. Same topology, addresses and configs as
# docker-compose.yml (frr/ and holdfast/ are shared).
#
# As root (prefix sudo if you are not root):
#   frr-lab/lab.sh up       # build the lab (idempotent)
#   frr-lab/lab.sh demo     # up, then show the flap fix at work; on a lab
#                           # already up it restores the shipped VIP files
#                           # first, so it can run again and again
#   frr-lab/lab.sh status   # what runs
#   frr-lab/lab.sh down     # remove everything the lab made
#
#   segment a: 192.0.2.0/26, 2001:db8:a::/64     segment b: 192.0.2.64/26, 2001:db8:b::/64
#   hflab-tor1 (br0) .1 / ::1                    hflab-tor2 (br0) .65 / ::1
#     ├── hflab-node1 .11 / ::11                   ├── hflab-node1 .75 / ::11
#     └── hflab-node2 .12 / ::12                   └── hflab-node2 .76 / ::12
#
# Every address is a documentation range and lives only inside the lab's
# namespaces; nothing is routed to or from the host. State, configs and
# logs live in /run/holdfast-lab/. Environment: HOLDFAST_BIN (a holdfast
# binary to use instead of building target/release/holdfast), LAB_RUN (the
# state directory).
set -euo pipefail

LAB="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$LAB")"
RUN="${LAB_RUN:-/run/holdfast-lab}"
TORS=(tor1 tor2)
NODES=(node1 node2)
FRR_LIB=/usr/lib/frr
HOLD_DOWN=10 # stability.withdraw_hold_down in holdfast/node*/holdfast.toml

ns() { echo "hflab-$1"; }
say() { printf '%s\n' "$*"; }
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
die() {
  printf 'lab.sh: %s\n' "$*" >&2
  exit 1
}

need_root() {
  [ "$(id -u)" -eq 0 ] || die "network namespaces need root: run $0 ${1:-} as root (prefix sudo if you are not root)"
}

# --- prerequisites -----------------------------------------------------------

ensure_packages() {
  local missing=()
  [ -x "$FRR_LIB/bgpd" ] && [ -x "$FRR_LIB/zebra" ] && command -v vtysh >/dev/null || missing+=(frr)
  command -v jq >/dev/null || missing+=(jq)
  command -v ip >/dev/null || missing+=(iproute2)
  [ ${#missing[@]} -eq 0 ] && return
  command -v apt-get >/dev/null ||
    die "missing ${missing[*]}, and this is not a Debian-like system: install them and run again"
  step "installing ${missing[*]} (apt-get update, apt-get install)"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
  # The package starts FRR's own service in the host's namespace; the lab
  # runs its daemons in its namespaces and needs none of it.
  if [[ " ${missing[*]} " == *" frr "* ]] && command -v systemctl >/dev/null; then
    systemctl disable --now frr >/dev/null 2>&1 || true
  fi
}

# The holdfast binary: $HOLDFAST_BIN, or target/release/holdfast, built with
# cargo if missing (as the user who ran sudo, if sudo ran this script, so
# target/ stays theirs).
HOLDFAST=""
ensure_holdfast() {
  if [ -n "${HOLDFAST_BIN:-}" ]; then
    [ -x "$HOLDFAST_BIN" ] || die "HOLDFAST_BIN=$HOLDFAST_BIN is not executable"
    HOLDFAST="$(realpath "$HOLDFAST_BIN")"
    return
  fi
  HOLDFAST="$REPO/target/release/holdfast"
  [ -x "$HOLDFAST" ] && return
  step "building holdfast (cargo build --release; a few minutes the first time)"
  local cargo user="${SUDO_USER:-}"
  local home
  cargo="$(command -v cargo || true)"
  if [ -z "$cargo" ] && [ -n "$user" ]; then
    home="$(getent passwd "$user" | cut -d: -f6)"
    [ -x "$home/.cargo/bin/cargo" ] && cargo="$home/.cargo/bin/cargo"
  fi
  [ -n "$cargo" ] || die "no cargo found: install Rust (https://rustup.rs), or set HOLDFAST_BIN"
  if [ -n "$user" ] && [ "$user" != root ]; then
    sudo -u "$user" -H env PATH="$(dirname "$cargo"):$PATH" \
      "$cargo" build --release --bin holdfast --manifest-path "$REPO/Cargo.toml"
  else
    "$cargo" build --release --bin holdfast --manifest-path "$REPO/Cargo.toml"
  fi
  [ -x "$HOLDFAST" ] || die "the build did not produce $HOLDFAST"
}

# --- helpers -------------------------------------------------------------------

vty() { # vty TOR COMMAND...
  local tor="$1"
  shift
  vtysh --vty_socket "$RUN/$tor" -c "$*"
}

in_ns() { # in_ns NAME COMMAND...
  local name="$1"
  shift
  ip netns exec "$(ns "$name")" "$@"
}

wait_for() { # wait_for SECONDS WHAT COMMAND...
  local deadline=$((SECONDS + $1)) what="$2"
  shift 2
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || die "timed out waiting for $what (logs in $RUN)"
    sleep 0.2
  done
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

lab_namespaces() { ip netns list 2>/dev/null | awk '{print $1}' | grep '^hflab-' || true; }

is_up() {
  local t n
  for t in "${TORS[@]}"; do
    alive "$RUN/$t/zebra.pid" && alive "$RUN/$t/bgpd.pid" || return 1
  done
  for n in "${NODES[@]}"; do alive "$RUN/$n/holdfast.pid" || return 1; done
}

# --- up ------------------------------------------------------------------------

make_ns() {
  local name
  name="$(ns "$1")"
  ip netns add "$name"
  ip -n "$name" link set dev lo up
  # Before any interface exists: IPv6 addresses usable at once (no DAD) and
  # kept when a link goes down.
  ip netns exec "$name" sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0 \
    net.ipv6.conf.all.keep_addr_on_down=1 net.ipv6.conf.default.keep_addr_on_down=1
}

build_topology() {
  local t n i seg v4 v6 tor_ns node_ns
  for t in "${TORS[@]}" "${NODES[@]}"; do make_ns "$t"; done
  for t in "${TORS[@]}"; do
    tor_ns="$(ns "$t")"
    case "$t" in
      tor1) v4=192.0.2 seg=a i=0 ;;
      tor2) v4=192.0.2 seg=b i=64 ;;
    esac
    v6="2001:db8:$seg"
    ip -n "$tor_ns" link add name br0 type bridge stp_state 0
    ip -n "$tor_ns" link set dev br0 up
    ip -n "$tor_ns" addr add "$v4.$((i + 1))/26" dev br0
    ip -n "$tor_ns" addr add "$v6::1/64" dev br0 nodad
    for n in "${NODES[@]}"; do
      node_ns="$(ns "$n")"
      # Both ends created inside their namespaces: nothing touches the host's.
      ip -n "$tor_ns" link add name "to-$n" type veth peer name "to-$t" netns "$node_ns"
      ip -n "$tor_ns" link set dev "to-$n" master br0
      ip -n "$tor_ns" link set dev "to-$n" up
      ip -n "$node_ns" link set dev "to-$t" up
      local host=$((${n#node} + 10))
      ip -n "$node_ns" addr add "$v4.$((i + host))/26" dev "to-$t"
      ip -n "$node_ns" addr add "$v6::$host/64" dev "to-$t" nodad
    done
  done
}

start_tor() {
  local t="$1" dir="$RUN/$1"
  mkdir -p "$dir"
  cp "$LAB/frr/$t/frr.conf" "$dir/bgpd.conf"
  : >"$dir/zebra.conf"
  # The daemons drop to user frr before creating their sockets and pid files.
  chown -R frr:frr "$dir"
  local common=(-i "$dir/DAEMON.pid" -z "$dir/zserv.api" --vty_socket "$dir" -P 0)
  # zebra first (bgpd connects to it): it knows the interfaces, which bgpd
  # needs to accept holdfast's IPv6 link-local next hops. No -n for zebra:
  # there it means something else (netns VRFs).
  in_ns "$t" "$FRR_LIB/zebra" -d -f "$dir/zebra.conf" "${common[@]/DAEMON/zebra}" \
    --log "file:$dir/zebra.log" >>"$dir/zebra.out" 2>&1
  wait_for 20 "zebra in $t" test -S "$dir/zserv.api"
  in_ns "$t" "$FRR_LIB/bgpd" -d -f "$dir/bgpd.conf" "${common[@]/DAEMON/bgpd}" \
    --log "file:$dir/bgpd.log" >>"$dir/bgpd.out" 2>&1
  wait_for 20 "bgpd in $t" test -S "$dir/bgpd.vty"
  wait_for 20 "bgpd in $t to answer" vty "$t" "show bgp summary"
  if grep -q "config line" "$dir/bgpd.log" 2>/dev/null; then
    die "FRR rejected lines of $LAB/frr/$t/frr.conf: $(grep "config line" "$dir/bgpd.log")"
  fi
}

start_node() {
  local n="$1" dir="$RUN/$1"
  mkdir -p "$dir/state"
  cp "$LAB/holdfast/$n/holdfast.toml" "$LAB/holdfast/$n/vips.toml" "$dir/"
  "$HOLDFAST" check --config "$dir/holdfast.toml" || die "$dir/holdfast.toml does not check"
  # `ip netns exec` and setsid exec holdfast, so $! is the daemon's pid; its
  # own session keeps a Ctrl-C in this terminal away from it.
  ip netns exec "$(ns "$n")" setsid "$HOLDFAST" run --config "$dir/holdfast.toml" \
    --state-dir "$dir/state" --log info </dev/null >"$dir/holdfast.log" 2>&1 &
  echo $! >"$dir/holdfast.pid"
}

established() { # established TOR ADDRESS
  vty "$1" "show bgp neighbors $2 json" | jq -e --arg a "$2" '.[$a].bgpState == "Established"'
}

lab_up() {
  ensure_packages
  ensure_holdfast
  if is_up; then
    say "The lab is already up (lab.sh down to remove it)."
    return
  fi
  if [ -n "$(lab_namespaces)" ] || [ -d "$RUN" ]; then
    say "A partial lab is in the way: removing it first."
    lab_down
  fi
  step "building the lab: namespaces $(for x in "${TORS[@]}" "${NODES[@]}"; do printf '%s ' "$(ns "$x")"; done)"
  mkdir -p "$RUN"
  build_topology
  for t in "${TORS[@]}"; do start_tor "$t"; done
  say "FRR (zebra, bgpd) runs in $(ns tor1) and $(ns tor2)."
  for n in "${NODES[@]}"; do start_node "$n"; done
  say "holdfast runs in $(ns node1) and $(ns node2) ($HOLDFAST)."
  step "waiting for the 8 BGP sessions"
  local a
  for a in 192.0.2.11 192.0.2.12 2001:db8:a::11 2001:db8:a::12; do
    wait_for 60 "tor1's session with $a" established tor1 "$a"
  done
  for a in 192.0.2.75 192.0.2.76 2001:db8:b::11 2001:db8:b::12; do
    wait_for 60 "tor2's session with $a" established tor2 "$a"
  done
  vty tor1 "show bgp ipv4 unicast summary"
  vty tor1 "show bgp ipv6 unicast summary"
}

# --- down ----------------------------------------------------------------------

lab_down() {
  local f name pids i
  if [ -z "$(lab_namespaces)" ] && [ ! -d "$RUN" ]; then
    say "Nothing to tear down: the lab is not up."
    return
  fi
  # holdfast first (SIGTERM: a clean stop), then the routers.
  for f in "$RUN"/*/holdfast.pid "$RUN"/*/bgpd.pid "$RUN"/*/zebra.pid; do
    alive "$f" && kill "$(cat "$f")" 2>/dev/null || true
  done
  for name in $(lab_namespaces); do
    for i in $(seq 50); do
      pids="$(ip netns pids "$name" 2>/dev/null || true)"
      [ -z "$pids" ] && break
      if [ "$i" -lt 25 ]; then
        # shellcheck disable=SC2086
        kill $pids 2>/dev/null || true
      else
        # shellcheck disable=SC2086
        kill -9 $pids 2>/dev/null || true
      fi
      sleep 0.2
    done
    ip netns del "$name"
  done
  rm -rf "$RUN"
  say "The lab is down: no hflab-* namespace, no lab process, $RUN removed."
}

# --- status --------------------------------------------------------------------

lab_status() {
  if ! is_up; then
    say "The lab is not (fully) up. Namespaces: $(lab_namespaces | tr '\n' ' ')"
    return 1
  fi
  vty tor1 "show bgp ipv4 unicast summary"
  vty tor1 "show bgp ipv4 unicast"
  in_ns node1 "$HOLDFAST" status
}

# --- demo ----------------------------------------------------------------------

updates_from() { # updates_from TOR ADDRESS: UPDATEs FRR has received from it
  vty "$1" "show bgp neighbors $2 json" | jq -r --arg a "$2" '.[$a].messageStats.updatesRecv'
}

paths_at() { # paths_at TOR PREFIX: how many paths FRR has for it (0: none)
  local afi=ipv4
  [[ "$2" == *:* ]] && afi=ipv6
  vty "$1" "show bgp $afi unicast $2 json" | jq -r '(.paths // []) | length'
}

has_route() { [ "$(paths_at "$1" "$2")" -gt 0 ]; }

# Rewrites a VIP file the way editors do: a new file renamed over the old.
write_vips() { # write_vips NODE CONTENT
  printf '%s' "$2" >"$RUN/$1/vips.toml.new"
  mv "$RUN/$1/vips.toml.new" "$RUN/$1/vips.toml"
}

without_vip() { # without_vip FILE ADDRESS: the file's text without that [[vip]] table
  awk -v addr="\"$2\"" '
    /^\[\[vip\]\]/ { if (block != "" && !drop) printf "%s", block; block = ""; drop = 0 }
    { block = block $0 "\n" }
    $1 == "address" && $3 == addr { drop = 1 }
    END { if (!drop) printf "%s", block }
  ' "$1"
}

metric() { # metric NODE NAME: a value from holdfast's /metrics
  in_ns "$1" bash -c 'exec 3<>/dev/tcp/127.0.0.1/9179; printf "GET /metrics HTTP/1.0\r\n\r\n" >&3; cat <&3' |
    awk -v m="$2" '$1 == m { print $2 }'
}

settle_updates() { # waits until FRR's UPDATE counter from ADDRESS stops moving
  local tor="$1" addr="$2" last now i
  last="$(updates_from "$tor" "$addr")"
  for i in $(seq 30); do
    sleep 1
    now="$(updates_from "$tor" "$addr")"
    [ "$now" = "$last" ] && return
    last="$now"
  done
}

# Puts the shipped VIP files back (an earlier demo removed 203.0.113.30 and
# left the lab up): the demo then starts from the state it describes.
restore_vips() {
  local n
  for n in "${NODES[@]}"; do
    cmp -s "$LAB/holdfast/$n/vips.toml" "$RUN/$n/vips.toml" && continue
    # A new file renamed over the old, as write_vips does.
    cp "$LAB/holdfast/$n/vips.toml" "$RUN/$n/vips.toml.new"
    mv "$RUN/$n/vips.toml.new" "$RUN/$n/vips.toml"
    say "Restored $RUN/$n/vips.toml from $LAB/holdfast/$n/vips.toml."
  done
}

lab_demo() {
  lab_up
  restore_vips
  local vips="198.51.100.10/32 198.51.100.20/32 203.0.113.30/32 2001:db8:100::10/128" p
  for p in $vips; do wait_for 60 "$p at tor1" has_route tor1 "$p"; done

  step "FRR's table at tor1: the VIPs of both nodes"
  vty tor1 "show bgp ipv4 unicast"
  vty tor1 "show bgp ipv6 unicast"
  say ""
  say "198.51.100.10 is on both nodes, so tor1 forwards to both (ECMP):"
  in_ns tor1 ip route show 198.51.100.10

  step "flapping 198.51.100.20 on node1 every second for 20 s"
  say "This is what an LB-IPAM bug does to a Service: its address vanishes and"
  say "comes back every second. holdfast holds the route (hold-down ${HOLD_DOWN} s),"
  say "so FRR should not receive a single UPDATE from node1."
  local flappy="198.51.100.20"
  local with without before1 before2 now1 now2 t present
  with="$(cat "$RUN/node1/vips.toml")"
  without="$(without_vip "$RUN/node1/vips.toml" "$flappy")"
  settle_updates tor1 192.0.2.11
  settle_updates tor2 192.0.2.75
  before1="$(updates_from tor1 192.0.2.11)"
  before2="$(updates_from tor2 192.0.2.75)"
  local absorbed_before
  absorbed_before="$(metric node1 holdfast_withdrawals_absorbed_total)"
  printf '  %-4s  %-14s  %-22s  %s\n' "t" "in node1's file" "paths at tor1 / tor2" "UPDATEs from node1 at tor1 / tor2"
  present=1
  for t in $(seq 1 20); do
    if [ "$present" = 1 ]; then
      write_vips node1 "$without"
      present=0
    else
      write_vips node1 "$with"
      present=1
    fi
    sleep 1
    now1="$(updates_from tor1 192.0.2.11)"
    now2="$(updates_from tor2 192.0.2.75)"
    printf '  %-4s  %-14s  %-22s  %s\n' "${t}s" "$([ "$present" = 1 ] && echo present || echo ABSENT)" \
      "$(paths_at tor1 "$flappy/32") / $(paths_at tor2 "$flappy/32")" "$now1 / $now2"
  done
  write_vips node1 "$with"
  sleep 1
  now1="$(updates_from tor1 192.0.2.11)"
  now2="$(updates_from tor2 192.0.2.75)"
  local absorbed
  absorbed="$(metric node1 holdfast_withdrawals_absorbed_total)"
  say ""
  say "UPDATEs FRR received from node1 during the flapping: tor1 $((now1 - before1)), tor2 $((now2 - before2))."
  say "node1's holdfast_withdrawals_absorbed_total: $absorbed_before -> $absorbed (withdraw/advertise pairs the routers never saw)."
  if [ "$now1" != "$before1" ] || [ "$now2" != "$before2" ]; then
    die "FRR received UPDATEs during the flap: the hold-down did not absorb it (see $RUN/node1/holdfast.log)"
  fi

  step "removing 203.0.113.30 for good (from both nodes)"
  local gone="203.0.113.30" start elapsed
  write_vips node1 "$(without_vip "$RUN/node1/vips.toml" "$gone")"
  write_vips node2 "$(without_vip "$RUN/node2/vips.toml" "$gone")"
  start=$(date +%s%N)
  while [ "$(paths_at tor1 "$gone/32")" != 0 ]; do
    elapsed=$((($(date +%s%N) - start) / 1000000))
    [ "$elapsed" -lt $(((HOLD_DOWN + 20) * 1000)) ] || die "$gone still at tor1 after $((elapsed / 1000)) s"
    printf '  %5.1f s  at tor1: %s path(s)   node1: %s\n' "$(echo "$elapsed" | awk '{print $1/1000}')" \
      "$(paths_at tor1 "$gone/32")" \
      "$(in_ns node1 "$HOLDFAST" status | grep -F "$gone/" | tr -s ' ' | cut -c1-70 || echo '?')"
    sleep 1
  done
  elapsed=$((($(date +%s%N) - start) / 1000000))
  say "  $gone left tor1's table $(echo "$elapsed" | awk '{printf "%.1f", $1/1000}') s after its removal (hold-down ${HOLD_DOWN} s)."

  step "the lab keeps running: things to look at"
  cat <<EOF
  FRR (routers; no need to enter the namespace, vtysh talks over a socket):
    vtysh --vty_socket $RUN/tor1 -c "show bgp summary"
    vtysh --vty_socket $RUN/tor1 -c "show bgp ipv4 unicast"
    vtysh --vty_socket $RUN/tor1 -c "show bgp neighbors 192.0.2.11 json" | jq '.[].messageStats'
  holdfast (nodes; as root, like everything here — prefix sudo if you are not root):
    ip netns exec $(ns node1) $HOLDFAST status
    ip netns exec $(ns node1) $HOLDFAST explain 198.51.100.20
    ip netns exec $(ns node1) bash -c 'exec 3<>/dev/tcp/127.0.0.1/9179; printf "GET /metrics HTTP/1.0\r\n\r\n" >&3; cat <&3'
  Edit the VIPs (picked up within a second; a removed VIP goes after ${HOLD_DOWN} s):
    \$EDITOR $RUN/node1/vips.toml
  Logs: $RUN/node1/holdfast.log, $RUN/tor1/bgpd.log
  Run the demo again (it restores the VIP files first): $0 demo
  Tear it all down:
    $0 down
EOF
}

case "${1:-}" in
  up)
    need_root up
    lab_up
    ;;
  demo)
    need_root demo
    lab_demo
    ;;
  down)
    need_root down
    lab_down
    ;;
  status)
    need_root status
    HOLDFAST="${HOLDFAST_BIN:-$REPO/target/release/holdfast}"
    lab_status
    ;;
  *)
    echo "usage: $0 up|demo|status|down" >&2
    exit 2
    ;;
esac
