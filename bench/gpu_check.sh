#!/usr/bin/env bash
# The CUDA checks and benchmark for a machine with an NVIDIA GPU, run from a bundle that
# bench/gpu_bundle.sh made on the build machine (binaries, the shared libraries they need,
# and the Vulkan loader's package): such a machine may lack the build's dependencies.
#
#   bench/gpu_check.sh BUNDLE OUT [quick]
#
# Runs every CUDA test binary (op by op against the CPU backend, end to end, the prompt
# cache), then benchmarks a synthetic model with Gemma 3 270M Q4_K_M's exact shapes and
# tensor types (hearth-make-synthetic --shape gemma3-270m): hearth-run --bench on cuda
# (graphs on and off), vulkan and the cpu, and the daemon's TTFT cold / memory hit / disk
# hit (bench/cache_bench.py). Logs go to OUT; the summary is printed. "quick" stops after
# the tests and one benchmark line.
set -uo pipefail
bundle="$(cd "$1" && pwd)"
out="$2"
quick="${3:-}"
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export HEARTH_SOURCE_DIR="$src" HEARTH_LOG_LEVEL=warn
t0=$SECONDS
step() { echo "== [$((SECONDS - t0)) s] $*"; }

# The Vulkan loader (the NVIDIA driver brings its ICD; the image may have no loader).
if ! ldconfig -p | grep libvulkan.so.1 >/dev/null && ls "$bundle"/debs/*.deb >/dev/null 2>&1; then
  for f in "$bundle"/debs/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] &&
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json

step "device"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv
"$bundle/hearth-run" --list-devices 2>&1

step "tests"
"$bundle/backend_cuda_host_tests" 2>&1 | tail -3
HEARTH_DEVICE_REPORT=1 timeout 300 "$bundle/backend_cuda_tests" --durations yes >"$out/ops.log" 2>&1
echo "backend_cuda_tests exit $?"
grep -E "worst|passed|failed|FAILED|test cases" "$out/ops.log" | tail -60
timeout 300 "$bundle/cuda_model_tests" --durations yes >"$out/model.log" 2>&1
echo "cuda_model_tests exit $?"
grep -E "vs cpu|passed|failed|FAILED|test cases|skipped" "$out/model.log" | tail -20
timeout 300 "$bundle/prefix_cache_cuda_tests" --durations yes >"$out/cache.log" 2>&1
echo "prefix_cache_cuda_tests exit $?"
grep -E "passed|failed|FAILED|test cases|skipped" "$out/cache.log" | tail -20

# The same three on the tensor-core MatMul (cu_matmul_mma.cu, TF32), not yet the default.
step "tests, HEARTH_CUDA_MATMUL=mma"
for t in backend_cuda_tests cuda_model_tests prefix_cache_cuda_tests; do
  HEARTH_CUDA_MATMUL=mma timeout 300 "$bundle/$t" --durations yes >"$out/mma-$t.log" 2>&1
  echo "$t (mma) exit $?"
  grep -E "worst|vs cpu|passed|failed|FAILED|test cases" "$out/mma-$t.log" | tail -30
done

step "model"
model=/tmp/gemma3-270m-synthetic.gguf
"$bundle/hearth-make-synthetic" --arch gemma3 --shape gemma3-270m --type q4_k --out "$model" 2>&1 | tail -2
ls -la "$model"

bench() {  # bench LABEL ARGS...: one hearth-run --bench line per prompt length
  local label="$1"
  shift
  for pp in 512 4096; do
    echo "-- $label pp$pp"
    timeout 120 "$bundle/hearth-run" -m "$model" --bench --pp "$pp" --tg 128 --reps 3 "$@" 2>&1 | tail -4
  done
}
step "bench cuda"
bench "cuda graphs" --backend cuda
HEARTH_CUDA_MATMUL=mma bench "cuda graphs, tensor-core matmul" --backend cuda
[ -n "$quick" ] && exit 0
HEARTH_CUDA_GRAPHS=0 bench "cuda no graphs" --backend cuda
step "bench vulkan"
bench "vulkan" --backend vulkan
step "bench cpu (16 threads)"
timeout 120 "$bundle/hearth-run" -m "$model" --bench --pp 512 --tg 128 --reps 2 --backend cpu -t 16 2>&1 | tail -4

step "ttft (daemon)"
HEARTH_BACKEND=cuda timeout 300 python3 "$src/bench/cache_bench.py" --hearthd "$bundle/hearthd" --model "$model" \
  --tokens 4000 --threads 4 2>&1 | tail -25
step "done"
