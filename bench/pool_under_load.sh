#!/usr/bin/env bash
# Prefill and decode with 0, 2, 6 and 10 busy processes beside the engine (each a shell
# loop that never sleeps), for hearth-run --bench and, when given, a second hearth-run
# (e.g. a build before a change) and llama.cpp's llama-bench. Busy processes are started
# and killed by this script only. Measures what a busy desktop (or a CI machine running
# tests in parallel) does to a thread pool: 2 threads on a 2-core machine.
#   bench/pool_under_load.sh [--before OLD_HEARTH_RUN] [--llama-bench PATH] [model.gguf]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
hearth_run="${HEARTH_RUN:-$here/build/tools/hearth-run}"
before="" llama_bench=""
while [ $# -gt 0 ]; do
  case "$1" in
    --before) before="$2"; shift 2 ;;
    --llama-bench) llama_bench="$2"; shift 2 ;;
    *) break ;;
  esac
done
model="${1:-${HEARTH_MODELS:-${XDG_DATA_HOME:-$HOME/.local/share}/hearth/models}/gemma-3-270m-q4_k_m.gguf}"
threads="${THREADS:-2}" pp="${PP:-64}" tg="${TG:-32}" reps="${REPS:-3}" loads="${LOADS:-0 2 6 10}"

busy=()
stop_busy() { for p in "${busy[@]}"; do kill "$p" 2>/dev/null || true; done; busy=(); }
trap stop_busy EXIT

hearth_line() {  # label binary
  "$2" -m "$model" --bench --pp "$pp" --tg "$tg" --reps "$reps" -t "$threads" |
    awk -v l="$1" -F'|' '/pp[0-9]|tg[0-9]/ { gsub(/ /, "", $5); printf "  %-14s %-6s %s tok/s\n", l, $5, $6 }'
}

for n in $loads; do
  for ((i = 0; i < n; ++i)); do (while :; do :; done) & busy+=($!); done
  sleep 1
  echo "== $n busy processes (load $(cut -d' ' -f1 /proc/loadavg))"
  [ -n "$before" ] && hearth_line before "$before"
  hearth_line hearth "$hearth_run"
  if [ -n "$llama_bench" ]; then
    "$llama_bench" -m "$model" -p "$pp" -n "$tg" -r "$reps" -t "$threads" -o md 2>/dev/null |
      awk -F'|' '/pp[0-9]|tg[0-9]/ { gsub(/ /, "", $(NF-2)); printf "  %-14s %-6s %s tok/s\n", "llama.cpp", $(NF-2), $(NF-1) }'
  fi
  stop_busy
done
