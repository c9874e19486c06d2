#!/usr/bin/env bash
# hearth-run --bench next to llama.cpp's llama-bench on the same model file, thread
# counts and test sizes, alternating the two so drift in machine speed hits both.
# llama.cpp is not part of hearth: build it yourself and pass its llama-bench.
#   bench/compare_llama_bench.sh /path/to/llama-bench [model.gguf] [threads...]
set -euo pipefail
llama_bench="${1:?usage: $0 /path/to/llama-bench [model.gguf] [threads...]}"
model="${2:-${HEARTH_MODELS:-${XDG_DATA_HOME:-$HOME/.local/share}/hearth/models}/gemma-3-270m-q4_k_m.gguf}"
shift $(( $# >= 2 ? 2 : 1 ))
threads=("${@:-1 2}")
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
hearth_run="${HEARTH_RUN:-$here/build/tools/hearth-run}"
reps="${REPS:-3}"

for t in ${threads[*]}; do
  echo "== threads $t"
  "$hearth_run" -m "$model" --bench --pp 512 --tg 128 --reps "$reps" -t "$t" | grep -E "pp512|tg128"
  "$llama_bench" -m "$model" -p 512 -n 128 -r "$reps" -t "$t" -o md 2>/dev/null | grep -E "pp512|tg128"
done
