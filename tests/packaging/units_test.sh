#!/bin/bash
# systemd-analyze verify on every hearth unit (packaging/systemd/{system,user}); any output
# at all (a warning, an unknown key, a missing binary) fails the test.
#   units_test.sh SOURCE_DIR [HEARTHD_BINARY]
# verify checks that ExecStart= exists, so the units are copied to a temp dir with
# /usr/bin/hearthd rewritten to HEARTHD_BINARY (default: SOURCE_DIR/build/daemon/hearthd).
# --man=no: verify would run man(1) for Documentation=man:hearthd(8), which is not
# installed at test time (the pages are checked by the package test).
# User units are verified with --user; that needs $XDG_RUNTIME_DIR (for %t) but no running
# manager, so a temp dir stands in when it is unset (CI: root in a container, no systemd).
# Exit 77 (skipped) when systemd-analyze is missing.
set -u
src=${1:?usage: units_test.sh SOURCE_DIR [HEARTHD_BINARY]}
bin=${2:-$src/build/daemon/hearthd}

if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "SKIP: systemd-analyze not installed (Debian package systemd)"
  exit 77
fi
if [ ! -x "$bin" ]; then
  echo "FAIL: hearthd binary $bin is not executable"
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

for kind in system user; do
  dir="$src/packaging/systemd/$kind"
  units=()
  mkdir -p "$tmp/$kind"
  for f in "$dir"/*.service "$dir"/*.socket; do
    [ -e "$f" ] || continue
    sed "s#/usr/bin/hearthd#$bin#g" "$f" >"$tmp/$kind/$(basename "$f")"
    units+=("$tmp/$kind/$(basename "$f")")
  done
  if [ ${#units[@]} -eq 0 ]; then
    echo "FAIL: no units in $dir"
    fail=1
    continue
  fi
  if [ "$kind" = user ]; then
    mkdir -p "$tmp/runtime" && chmod 0700 "$tmp/runtime"
    out=$(XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$tmp/runtime}" \
      systemd-analyze --user verify --man=no "${units[@]}" 2>&1)
  else
    out=$(systemd-analyze --system verify --man=no "${units[@]}" 2>&1)
  fi
  rc=$?
  if [ $rc -ne 0 ] || [ -n "$out" ]; then
    echo "FAIL: systemd-analyze verify ($kind units), exit $rc:"
    printf '%s\n' "$out"
    fail=1
  else
    echo "ok: $kind units: $(cd "$tmp/$kind" && echo *)"
  fi
done

# Both instances must have a socket and a service, and the service must be socket-activated
# and of Type=notify (a grep, not a parse: systemd-analyze checks syntax above).
for kind in system user; do
  s="$src/packaging/systemd/$kind/hearthd.service"
  k="$src/packaging/systemd/$kind/hearthd.socket"
  for want in '^Type=notify$' '^Requires=hearthd\.socket$' '^WatchdogSec=' '^Also=hearthd\.socket$'; do
    grep -q "$want" "$s" || { echo "FAIL: $s lacks $want"; fail=1; }
  done
  grep -q '^ListenStream=' "$k" || { echo "FAIL: $k lacks ListenStream="; fail=1; }
done
grep -q '^ListenStream=/run/hearth/hearth.sock$' "$src/packaging/systemd/system/hearthd.socket" ||
  { echo "FAIL: system socket is not /run/hearth/hearth.sock"; fail=1; }
grep -q '^ListenStream=%t/hearth/hearth.sock$' "$src/packaging/systemd/user/hearthd.socket" ||
  { echo "FAIL: user socket is not %t/hearth/hearth.sock"; fail=1; }

exit $fail
