#!/usr/bin/env bash
# Which top-level module of the holdfast crate imports which (the
# `crate::X` paths of its non-test source files, comments skipped), checked
# against the layering ARCHITECTURE.md describes. Data flows one way:
#
#   source → stability → speaker → routes → session
#
# (`routes` composes the stability layer and the per-peer tables, so it
# comes after both; a session is handed its peer's table by value.) Every
# module's allowed imports are listed below: an import not listed is a
# violation, so a new edge between modules is a decision made here, with
# its reason, not an accident. Exits 1 on a violation.
# Usage: scripts/deps.sh [--all]   (--all counts test files too, shown
# but not checked: tests may cross layers).
set -euo pipefail
cd "$(dirname "$0")/../src"

all=false
[ "${1:-}" = "--all" ] && all=true

# module → the modules it may import, and why.
declare -A ALLOWED=(
  # Shared vocabulary (what flows between the layers, the sorted map,
  # address rules, link bandwidth) and the deadline sleep: no layer.
  [model]="suggest"
  [sleep]=""
  # "Did you mean": the nearest name in a list (used by model and config).
  [suggest]=""
  [build_info]=""
  # Every layer's settings: a `[stability]` table *is* stability::Params,
  # a BFD key is bfd::auth::Key, checked as it is read; docs: the
  # reference's cell formatting.
  [config]="bfd docs model stability suggest"
  # Sources: the settings, the model. `report`: the Kubernetes watcher
  # records its policy's refusals as Events (report::events).
  [source]="config model report sleep"
  [stability]="model"
  [speaker]="config model"
  [probe]="config model"
  [bfd]="model"
  # The routes core: placement of the source's VIPs (desired), the
  # stability layer, probes, drains, the per-peer tables; `report` for the
  # withdraw causes it logs; `source` for the Node's facts a drain follows.
  [routes]="config model probe report source speaker stability"
  # A session reports what it writes to the BMP stations through its tap
  # (bmp::PeerTap): it only queues, never waits.
  [session]="bfd bmp config model report speaker"
  # BMP (RFC 7854): the stations' settings, sysDescr's version.
  [bmp]="build_info config"
  # Reports read the layers' values: the status view, logs (with the
  # stability layer's reasons), Kubernetes Events and BGPNodeStatus (with
  # the Kubernetes source's client helpers).
  [report]="config model source stability"
  [api]="build_info docs report"
  [cli]="api build_info config report source"
  # The generated reference pages read the definitions they document.
  [docs]="api cli config source"
  # The wiring: every layer.
  [daemon]="api bfd bmp build_info config handoff model probe report routes session sleep source speaker stability"
  # The live hand-off: the protocol and its IO; it names the build.
  [handoff]="build_info model"
)

modules=$(ls -d */ *.rs | sed 's#/$##; s#\.rs$##' | grep -vx 'main\|lib' | sort -u)

files_of() {
  local m=$1
  { [ -f "$m.rs" ] && echo "$m.rs"; [ -d "$m" ] && find "$m" -name '*.rs'; } |
    if $all; then cat; else grep -vE '(^|/)tests(/|\.rs$)|_tests\.rs$'; fi
}

deps_of() {
  local m=$1
  # shellcheck disable=SC2046
  { files_of "$m" | xargs -r grep -hv '^\s*//' |
    grep -oE '\bcrate::[a-z_]+' | sed 's/crate:://' | grep -vx "$m" || true; } | sort -u | tr '\n' ' '
}

status=0
for m in $modules; do
  deps=$(deps_of "$m")
  printf '%-10s → %s\n' "$m" "${deps:-(none)}"
  $all && continue
  if [ -z "${ALLOWED[$m]+set}" ]; then
    echo "violation: $m is a module scripts/deps.sh does not know: list what it may import"
    status=1
    continue
  fi
  for d in $deps; do
    if [[ " ${ALLOWED[$m]} " != *" $d "* ]]; then
      echo "violation: $m imports $d, which scripts/deps.sh does not allow it"
      status=1
    fi
  done
done

$all && exit 0
[ $status -eq 0 ] && echo "layers as ARCHITECTURE.md describes: source → stability → speaker → routes → session; model and sleep import none"
exit $status
