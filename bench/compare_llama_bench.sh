#!/usr/bin/env bash
# hearth-run --bench next to one or more llama-bench builds (llama.cpp, ik_llama.cpp, ...)
# on the same model file, thread counts and test sizes, engines alternating per thread
# count so drift in machine speed hits all of them. The other engines are not part of
# hearth: build them yourself and pass each llama-bench as "label=/path/to/llama-bench
# [extra llama-bench arguments]".
#   bench/compare_llama_bench.sh "llama.cpp=/opt/lcp/llama-bench" "ik-rtr=/opt/ik/llama-bench -rtr 1"
# Environment: MODEL (default: Gemma 3 270M in the models folder), THREADS ("1 2"),
# PP (prompt sizes, "512"), TG (generated tokens, 128), REPS (3).
# Prints the machine first (CPU model, the instruction-set flags that pick kernels, cores,
# caches: results differ by machine kind, see docs/engine.md), then one markdown row per
# engine and test (tokens/s, mean ± std), then hearth's own GOP/s and GB/s against this
# machine's peaks.
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,13p' "$0"; exit 2; }
model="${MODEL:-${HEARTH_MODELS:-${XDG_DATA_HOME:-$HOME/.local/share}/hearth/models}/gemma-3-270m-q4_k_m.gguf}"
threads="${THREADS:-1 2}"
pp="${PP:-512}"
tg="${TG:-128}"
reps="${REPS:-3}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
hearth_run="${HEARTH_RUN:-$here/build/tools/hearth-run}"

# The machine this ran on, from /proc/cpuinfo (lscpu adds caches where it exists).
cpu_field() { sed -n "s/^$1[[:space:]]*: //p" /proc/cpuinfo | head -1; }
flags=" $(cpu_field flags) "
kernel_flags=""
for f in avx2 fma f16c avx_vnni avx512f avx512bw avx512vl avx512_vnni avx512_bf16 avx512_fp16 amx_tile amx_int8 \
  amx_bf16; do
  case "$flags" in *" $f "*) kernel_flags="$kernel_flags $f" ;; esac
done
echo "cpu: $(cpu_field 'model name') ($(cpu_field vendor_id), family $(cpu_field 'cpu family') model \
$(cpu_field model)), $(nproc) CPUs online, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)"
echo "cpu kernel flags:${kernel_flags:- (none of avx2, avx512, amx)}"
if command -v lscpu >/dev/null; then
  lscpu | grep -E "^(L2|L3) cache|^Hypervisor vendor" | sed 's/^/cpu /; s/  */ /g' || true
fi
echo "cpu flags (all):${flags% }"
echo "model: $model"
echo "| engine | threads | test | t/s |"
echo "| --- | ---: | ---: | ---: |"
for t in $threads; do
  for p in $pp; do
    "$hearth_run" -m "$model" --bench --pp "$p" --tg 0 --reps "$reps" -t "$t" 2>/dev/null |
      awk -F'|' -v t="$t" '/ pp[0-9]/ { printf "| hearth | %s | %s | %s |\n", t, $5, $6 }'
    for engine in "$@"; do
      label="${engine%%=*}"
      read -r -a cmd <<<"${engine#*=}"
      "${cmd[@]}" -m "$model" -p "$p" -n 0 -r "$reps" -t "$t" -o md 2>/dev/null |
        awk -F'|' -v t="$t" -v l="$label" '/ pp[0-9]/ { printf "| %s | %s | %s | %s |\n", l, t, $(NF-2), $(NF-1) }'
    done
  done
  "$hearth_run" -m "$model" --bench --pp 0 --tg "$tg" --reps "$reps" -t "$t" 2>/dev/null |
    awk -F'|' -v t="$t" '/ tg[0-9]/ { printf "| hearth | %s | %s | %s |\n", t, $5, $6 }'
  for engine in "$@"; do
    label="${engine%%=*}"
    read -r -a cmd <<<"${engine#*=}"
    "${cmd[@]}" -m "$model" -p 0 -n "$tg" -r "$reps" -t "$t" -o md 2>/dev/null |
      awk -F'|' -v t="$t" -v l="$label" '/ tg[0-9]/ { printf "| %s | %s | %s | %s |\n", l, t, $(NF-2), $(NF-1) }'
  done
  "$hearth_run" -m "$model" --bench --pp "${pp%% *}" --tg "$tg" --reps "$reps" -t "$t" 2>&1 | grep -E "^(prefill|decode):" || true
done
