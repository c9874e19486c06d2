#!/usr/bin/env bash
# Gathers what bench/gpu_check.sh runs on a GPU machine that lacks the build's dependencies:
# the CUDA test binaries, hearth-run, hearthd and hearth-make-synthetic from build dir BUILD,
# every shared library they load that is not the C library or the compiler's runtime, and
# the Vulkan loader's Debian package (for the Vulkan backend on the same GPU).
#
#   bench/gpu_bundle.sh BUILD BUNDLE
set -euo pipefail
build="$1"
bundle="$2"
rm -rf "$bundle"
mkdir -p "$bundle/lib" "$bundle/debs"
bins=(tests/backend/backend_cuda_tests tests/backend/backend_cuda_host_tests tests/device/cuda_model_tests
      tests/engine/prefix_cache_cuda_tests tools/hearth-run daemon/hearthd tests/tools/hearth-make-synthetic)
for b in "${bins[@]}"; do
  cp "$build/$b" "$bundle/"
  strip "$bundle/$(basename "$b")"
done
# Libraries by soname, resolved here; glibc's own and libstdc++/libgcc_s (a newer system
# has newer ones, which serve an older build) stay behind.
for b in "$bundle"/*; do
  [ -f "$b" ] || continue
  ldd "$b" | awk '/=> \// { print $3 }'
done | sort -u | grep -Ev '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libstdc\+\+|libgcc_s)\.so' |
  while read -r lib; do cp -L "$lib" "$bundle/lib/"; done
(cd "$bundle/debs" && apt-get download libvulkan1 >/dev/null 2>&1) || echo "gpu_bundle: no libvulkan1 package (vulkan not benchmarked)"
du -sh "$bundle"
