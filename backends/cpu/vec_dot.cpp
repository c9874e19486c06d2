// SIMD level detection and dispatch to the per-ISA kernel tables.
#include "backends/cpu/vec_dot.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cctype>
#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>
#include <vector>
#if defined(HEARTH_X86_KERNELS)
#include <cpuid.h>
#endif
#if defined(HEARTH_X86_KERNELS) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "backends/cpu/quant_ref.h"
#include "backends/cpu/vec_dot_kernels.h"

namespace hearth::cpu {
namespace {

using detail::GemmArgs;
using detail::KernelTable;

#if defined(HEARTH_X86_KERNELS)
// F16C (CPUID leaf 1, ECX bit 29), asked of the CPU directly: Clang before 16 does not know
// "f16c" as a __builtin_cpu_supports feature (the fuzz build compiles with Clang 14).
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
}

#if defined(HEARTH_AMX_KERNELS)
// AMX-TILE and AMX-INT8: CPUID leaf 7 sub-leaf 0, EDX bits 24 and 25.
bool cpu_has_amx_int8() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  return (edx & (1u << 24)) != 0 && (edx & (1u << 25)) != 0;
}

// Linux (5.16+) hands the 8 KiB tile state to a process only on request; without the grant
// the first tile instruction faults (SIGILL). The grant is per process, all threads.
bool os_grants_amx() {
#if defined(__linux__) && defined(SYS_arch_prctl)
  constexpr int kArchReqXcompPerm = 0x1023;
  constexpr int kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}
#endif  // HEARTH_AMX_KERNELS
#endif  // HEARTH_X86_KERNELS

SimdLevel detect_uncached() {
#if defined(HEARTH_X86_KERNELS)
  __builtin_cpu_init();
  // __builtin_cpu_supports also checks that the OS saves the AVX / AVX-512 register state
  // (F16C needs no more than AVX's).
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vnni");
#if defined(HEARTH_AMX_KERNELS)
  if (avx512 && cpu_has_amx_int8() && os_grants_amx()) return SimdLevel::AMX;
#endif
  if (avx512) return SimdLevel::AVX512;
  if (avx2) return SimdLevel::AVX2;
#endif
  return SimdLevel::Scalar;
}

SimdLevel initial_level() {
  return level_from_env(detect_simd_level(), std::getenv("HEARTH_SIMD"), std::getenv("HEARTH_AMX"));
}

std::atomic<SimdLevel>& active() {
  static std::atomic<SimdLevel> level{initial_level()};
  return level;
}

std::atomic<int>& streams() {
  static std::atomic<int> n{[] {
    const char* env = std::getenv("HEARTH_DECODE_STREAMS");
    const int v = env != nullptr ? std::atoi(env) : 0;
    return v == 1 || v == 2 ? v : 0;
  }()};
  return n;
}

const KernelTable& table(SimdLevel level) {
  switch (level) {
#if defined(HEARTH_X86_KERNELS)
#if defined(HEARTH_AMX_KERNELS)
    case SimdLevel::AMX:
      return detail::amx_kernels();
#endif
    case SimdLevel::AVX512:
      return detail::avx512_kernels();
    case SimdLevel::AVX2:
      return detail::avx2_kernels();
#endif
    default:
      return detail::scalar_kernels();
  }
}

SimdLevel clamp(SimdLevel level) {
  const SimdLevel best = detect_simd_level();
  return level > best ? best : level;
}

detail::GemmFn gemm_fn(SimdLevel level, DType w) {
  const int i = detail::type_index(w);
  assert(i >= 0 && i < detail::kMaxTypeId);
  if (detail::GemmFn f = table(clamp(level)).gemm[i]) return f;
  return detail::scalar_kernels().gemm[i];
}

}  // namespace

detail::GemmFn detail::gemm_repacked_fn(SimdLevel level, DType w) {
  const int i = detail::type_index(w);
  assert(i >= 0 && i < detail::kMaxTypeId);
  return table(clamp(level)).gemm_repacked[i];
}

SimdLevel level_from_env(SimdLevel detected, const char* hearth_simd, const char* hearth_amx) {
  SimdLevel level = detected;
  SimdLevel wanted;
  if (hearth_simd && parse_simd_level(hearth_simd, &wanted) && wanted < level) level = wanted;
  if (hearth_amx && std::string_view(hearth_amx) == "0" && level == SimdLevel::AMX) level = SimdLevel::AVX512;
  return level;
}

SimdLevel detect_simd_level() {
  static const SimdLevel kLevel = detect_uncached();
  return kLevel;
}

SimdLevel active_simd_level() {
  return active().load(std::memory_order_relaxed);
}

SimdLevel set_simd_level(SimdLevel level) {
  const SimdLevel l = clamp(level);
  active().store(l, std::memory_order_relaxed);
  return l;
}

namespace detail {
const int64_t kPrefetchBytesOverride = [] {
  const char* env = std::getenv("HEARTH_PREFETCH_BYTES");
  return env != nullptr && *env != '\0' ? std::max<int64_t>(0, std::atoll(env)) : int64_t{0};
}();
}  // namespace detail

int decode_streams() {
  return streams().load(std::memory_order_relaxed);
}

int set_decode_streams(int n) {
  return streams().exchange(n == 1 || n == 2 ? n : 0, std::memory_order_relaxed);
}

double amx_int8_gops(int threads) {
#if defined(HEARTH_AMX_KERNELS)
  if (detect_simd_level() < SimdLevel::AMX || threads < 1) return 0;
  constexpr int64_t kReps = 1 << 18;  // x 4 x 16 x 16 x 64 = 268 M multiply-adds a thread
  // Each thread's own CPU time, not the wall's: on a shared machine a thread waiting for a
  // core is not the unit being slow.
  auto thread_seconds = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  };
  std::atomic<int64_t> sink{0};
  double best = 0;
  for (int round = 0; round < 3; ++round) {
    std::vector<double> secs(static_cast<size_t>(threads));
    std::vector<std::thread> ts;
    for (int i = 0; i < threads; ++i)
      ts.emplace_back([&, i] {
        const double t0 = thread_seconds();
        sink += detail::amx_peak_loop(kReps);
        secs[static_cast<size_t>(i)] = thread_seconds() - t0;
      });
    for (std::thread& t : ts) t.join();
    const double slowest = *std::max_element(secs.begin(), secs.end());
    best = std::max(best, 2.0 * kReps * 4 * 16 * 16 * 64 * threads / slowest / 1e9);
  }
  return sink.load() == 42 ? best + 1e-12 : best;  // uses sink
#else
  (void)threads;
  return 0;
#endif
}

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::Scalar:
      return "scalar";
    case SimdLevel::AVX2:
      return "avx2";
    case SimdLevel::AVX512:
      return "avx512";
    case SimdLevel::AMX:
      return "amx";
  }
  return "?";
}

bool parse_simd_level(std::string_view name, SimdLevel* out) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (SimdLevel l : {SimdLevel::Scalar, SimdLevel::AVX2, SimdLevel::AVX512, SimdLevel::AMX}) {
    if (lower == simd_level_name(l)) {
      *out = l;
      return true;
    }
  }
  return false;
}

DType vec_dot_type(DType w) {
  switch (w) {
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:
      return DType::Q8_0;
    case DType::Q4_1:
    case DType::Q5_1:
      return DType::Q8_1;
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
      return DType::Q8_K;
    default:
      return DType::F32;
  }
}

bool vec_dot_supported(DType w) {
  const int i = detail::type_index(w);
  return i >= 0 && i < detail::kMaxTypeId && detail::scalar_kernels().gemm[i] != nullptr;
}

void quantize_activations_at(SimdLevel level, DType act_type, const float* x, void* dst, int64_t n) {
  const int i = detail::type_index(act_type);
  assert(i >= 0 && i < detail::kMaxTypeId);
  detail::QuantizeFn f = table(clamp(level)).quantize[i];
  if (!f) f = detail::scalar_kernels().quantize[i];
  assert(f && "quantize_activations: not an activation type");
  f(x, dst, n);
}

void quantize_activations(DType act_type, const float* x, void* dst, int64_t n) {
  quantize_activations_at(active_simd_level(), act_type, x, dst, n);
}

void gemm_at(SimdLevel level, DType wtype, int64_t n_in, const void* W, size_t w_stride_bytes, int64_t row_begin,
             int64_t row_end, const void* A, size_t a_stride_bytes, int64_t n_tok, float* Y, size_t y_stride_floats) {
  assert(n_in % dtype_info(wtype).block_elems == 0);
  if (row_end <= row_begin || n_tok <= 0) return;
  const GemmArgs args{n_in,
                      static_cast<const uint8_t*>(W),
                      w_stride_bytes,
                      row_begin,
                      row_end,
                      static_cast<const uint8_t*>(A),
                      a_stride_bytes,
                      n_tok,
                      Y,
                      y_stride_floats};
  detail::GemmFn f = gemm_fn(level, wtype);
  assert(f && "gemm: unsupported weight type");
  f(args);
}

void gemm(DType wtype, int64_t n_in, const void* W, size_t w_stride_bytes, int64_t row_begin, int64_t row_end,
          const void* A, size_t a_stride_bytes, int64_t n_tok, float* Y, size_t y_stride_floats) {
  gemm_at(active_simd_level(), wtype, n_in, W, w_stride_bytes, row_begin, row_end, A, a_stride_bytes, n_tok, Y,
          y_stride_floats);
}

float vec_dot_at(SimdLevel level, DType weight_type, int64_t n, const void* w_row, const void* act_row) {
  float y = 0.0f;
  gemm_at(level, weight_type, n, w_row, 0, 0, 1, act_row, 0, 1, &y, 1);
  return y;
}

float vec_dot(DType weight_type, int64_t n, const void* w_row, const void* act_row) {
  return vec_dot_at(active_simd_level(), weight_type, n, w_row, act_row);
}

}  // namespace hearth::cpu
