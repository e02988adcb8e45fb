#!/usr/bin/env bash
# Which top-level module of the holdfast crate imports which, from the
# `crate::X` paths in its non-test source files (comments skipped), and a
# check that the data flow runs one way:
#
#   model, net (shared vocabulary: import no layer)
#   sleep, sorted, suggest (utilities: import nothing)
#   source → stability → speaker → session   (policy is source::kubernetes::policy)
#
# A layer may use the layers before it and the shared modules, never one
# after it. Exits 1 on a violation. Usage: scripts/deps.sh [--all]
# (--all counts test files too, shown but not checked).
set -euo pipefail
cd "$(dirname "$0")/../src"

all=false
[ "${1:-}" = "--all" ] && all=true

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

declare -A DEPS
for m in $modules; do
  DEPS[$m]=$(deps_of "$m")
  printf '%-10s → %s\n' "$m" "${DEPS[$m]:-(none)}"
done

$all && exit 0

chain=(source stability speaker session)
status=0
# Shared vocabulary and utilities import nothing, but the model may keep
# its maps in `sorted` and suggest a well-known community's name with
# `suggest` (utilities that themselves import nothing).
for m in model net sleep sorted suggest; do
  deps=" ${DEPS[$m]} "
  [ "$m" = model ] && deps="${deps// sorted / }" && deps="${deps// suggest / }"
  if [ -n "${deps// /}" ]; then
    echo "violation: $m is shared vocabulary but imports ${DEPS[$m]}"
    status=1
  fi
done
for i in "${!chain[@]}"; do
  for j in "${!chain[@]}"; do
    if [ "$j" -gt "$i" ] && [[ " ${DEPS[${chain[$i]}]} " == *" ${chain[$j]} "* ]]; then
      echo "violation: ${chain[$i]} imports ${chain[$j]}, a layer after it"
      status=1
    fi
  done
done
[ $status -eq 0 ] && echo "flow one way: ${chain[*]} (each imports only layers before it, model, net, sleep, sorted and suggest import none but sorted and suggest)"
exit $status
