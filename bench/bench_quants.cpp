// Micro-benchmark of the quantized gemm kernels, single thread, per SIMD level.
//   bench_quants [scalar|avx2|avx512|amx ...] [prefill]   (default: every level this CPU
//   supports; prefill: the prefill shapes only)
// decode:  Q8_0 262144 x 640 with one token (Gemma 3 270M's tied output projection), Q5_0
//          65536 x 640, Q4_K and Q6_K 16384 x 2048 with 1 and 4 tokens, plain and repacked at
//          load: GB/s of weights streamed, which should approach the memory bandwidth of one core.
// prefill: Q5_0 / Q4_K / Q6_K / Q8_0 with 512 tokens at the model's FFN shapes: GFLOP/s
//          (2 * rows * n_in * n_tok per call), plain and repacked.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <vector>

#include "backends/cpu/quant_ref.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/vec_dot.h"
#include "common/fp16.h"

using hearth::DType;
using namespace hearth::cpu;

namespace {

uint64_t g_state = 0x9E3779B97F4A7C15ull;
uint64_t next_u64() {
  g_state ^= g_state << 13;
  g_state ^= g_state >> 7;
  g_state ^= g_state << 17;
  return g_state;
}

// rows x n weights of type t: random quants with small finite scales (values do not matter
// for speed, only that no NaN/inf slows anything down).
std::vector<uint8_t> random_weights(DType t, int64_t rows, int64_t n) {
  const size_t row = hearth::row_bytes(t, n);
  std::vector<uint8_t> w(row * static_cast<size_t>(rows));
  for (size_t i = 0; i + 8 <= w.size(); i += 8) {
    const uint64_t v = next_u64();
    std::memcpy(w.data() + i, &v, 8);
  }
  const auto& info = hearth::dtype_info(t);
  const uint16_t h = hearth::fp32_to_fp16(0.01f);
  const size_t n_blocks = w.size() / info.block_bytes;
  for (size_t b = 0; b < n_blocks; ++b) {
    uint8_t* p = w.data() + b * info.block_bytes;
    if (t == DType::Q6_K) {
      std::memcpy(p + 208, &h, 2);
    } else {
      std::memcpy(p, &h, 2);
      if (t == DType::Q4_K || t == DType::Q5_K) std::memcpy(p + 2, &h, 2);
    }
  }
  return w;
}

std::vector<uint8_t> activations(DType wtype, int64_t n, int64_t n_tok) {
  const DType at = vec_dot_type(wtype);
  std::vector<float> x(static_cast<size_t>(n));
  std::vector<uint8_t> a(hearth::row_bytes(at, n) * static_cast<size_t>(n_tok));
  for (int64_t t = 0; t < n_tok; ++t) {
    for (auto& v : x) v = static_cast<float>(static_cast<int64_t>(next_u64() % 2001) - 1000) / 1000.0f;
    quantize_activations(at, x.data(), a.data() + t * hearth::row_bytes(at, n), n);
  }
  return a;
}

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Best time in seconds of `reps` calls: thread CPU time, so that other processes sharing
// the machine do not count (they still share the memory bandwidth and caches).
template <class F>
double best_time(int reps, F f) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const double t0 = thread_cpu_seconds();
    f();
    best = std::min(best, thread_cpu_seconds() - t0);
  }
  return best;
}

// n_tok tokens (1 for decode; a few for continuous batching's decode steps) against a
// matrix bigger than the caches: GB/s of weights streamed.
void bench_decode(SimdLevel level, DType t, const std::vector<uint8_t>& w, int64_t rows, int64_t n, int64_t n_tok) {
  const auto a = activations(t, n, n_tok);
  std::vector<float> y(static_cast<size_t>(rows * n_tok));
  const size_t row = hearth::row_bytes(t, n), arow = hearth::row_bytes(vec_dot_type(t), n);
  const double s = best_time(level == SimdLevel::Scalar ? 2 : 6, [&] {
    gemm_at(level, t, n, w.data(), row, 0, rows, a.data(), arow, n_tok, y.data(), static_cast<size_t>(rows));
  });
  std::printf("  decode  %-4s %6lld x %4lld  n_tok=%-4lld %8.2f ms  %7.2f GB/s\n", hearth::dtype_name(t),
              static_cast<long long>(rows), static_cast<long long>(n), static_cast<long long>(n_tok), s * 1e3,
              static_cast<double>(w.size()) / s / 1e9);
}

// The same on the weights repacked at load (repack.h), where this level reads that layout.
void bench_decode_repacked(SimdLevel level, DType t, const std::vector<uint8_t>& w, int64_t rows, int64_t n,
                           int64_t n_tok) {
  if (!repack_useful(t, level, n, rows)) return;
  std::vector<uint8_t> r(repacked_bytes(t, n, rows));
  repack_rows(t, n, w.data(), hearth::row_bytes(t, n), rows, r.data());
  const auto a = activations(t, n, n_tok);
  std::vector<float> y(static_cast<size_t>(rows * n_tok));
  const size_t arow = hearth::row_bytes(vec_dot_type(t), n);
  const double s = best_time(6, [&] {
    gemm_repacked_at(level, t, n, r.data(), 0, rows, a.data(), arow, n_tok, y.data(), static_cast<size_t>(rows));
  });
  std::printf("  decode  %-4s %6lld x %4lld  n_tok=%-4lld %8.2f ms  %7.2f GB/s  repacked\n", hearth::dtype_name(t),
              static_cast<long long>(rows), static_cast<long long>(n), static_cast<long long>(n_tok), s * 1e3,
              static_cast<double>(r.size()) / s / 1e9);
}

void bench_prefill(SimdLevel level, DType t, int64_t rows, int64_t n, int64_t n_tok) {
  const auto w = random_weights(t, rows, n);
  const auto a = activations(t, n, n_tok);
  std::vector<float> y(static_cast<size_t>(rows * n_tok));
  const size_t wrow = hearth::row_bytes(t, n), arow = hearth::row_bytes(vec_dot_type(t), n);
  const double s = best_time(level == SimdLevel::Scalar ? 1 : 3, [&] {
    gemm_at(level, t, n, w.data(), wrow, 0, rows, a.data(), arow, n_tok, y.data(), static_cast<size_t>(rows));
  });
  std::printf("  prefill %-4s %6lld x %4lld  n_tok=%-4lld %8.2f ms  %7.1f GFLOP/s\n", hearth::dtype_name(t),
              static_cast<long long>(rows), static_cast<long long>(n), static_cast<long long>(n_tok), s * 1e3,
              2.0 * rows * n * n_tok / s / 1e9);
}

// The same on the weights repacked at load, as the CPU backend runs prefill.
void bench_prefill_repacked(SimdLevel level, DType t, int64_t rows, int64_t n, int64_t n_tok) {
  if (!repack_useful(t, level, n, rows)) return;
  const auto w = random_weights(t, rows, n);
  std::vector<uint8_t> r(repacked_bytes(t, n, rows));
  repack_rows(t, n, w.data(), hearth::row_bytes(t, n), rows, r.data());
  const auto a = activations(t, n, n_tok);
  std::vector<float> y(static_cast<size_t>(rows * n_tok));
  const size_t arow = hearth::row_bytes(vec_dot_type(t), n);
  const double s = best_time(3, [&] {
    gemm_repacked_at(level, t, n, r.data(), 0, rows, a.data(), arow, n_tok, y.data(), static_cast<size_t>(rows));
  });
  std::printf("  prefill %-4s %6lld x %4lld  n_tok=%-4lld %8.2f ms  %7.1f GFLOP/s  repacked\n", hearth::dtype_name(t),
              static_cast<long long>(rows), static_cast<long long>(n), static_cast<long long>(n_tok), s * 1e3,
              2.0 * rows * n * n_tok / s / 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<SimdLevel> levels;
  bool prefill_only = false;  // "prefill": skip the decode shapes
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "prefill") == 0) {
      prefill_only = true;
      continue;
    }
    SimdLevel l;
    if (!parse_simd_level(argv[i], &l)) {
      std::fprintf(stderr, "usage: %s [scalar|avx2|avx512|amx ...] [prefill]\n", argv[0]);
      return 2;
    }
    levels.push_back(l);
  }
  if (levels.empty())
    for (SimdLevel l : {SimdLevel::Scalar, SimdLevel::AVX2, SimdLevel::AVX512, SimdLevel::AMX})
      if (l <= detect_simd_level()) levels.push_back(l);

  constexpr int64_t kVocab = 262144, kEmbd = 640, kFfn = 2048, kTokens = 512;
  const auto w_out = random_weights(DType::Q8_0, kVocab, kEmbd);
  const auto w_q5 = random_weights(DType::Q5_0, kVocab / 4, kEmbd);
  const auto w_q5_l2 = random_weights(DType::Q5_0, kFfn, kEmbd);
  const auto w_q4k = random_weights(DType::Q4_K, kVocab / 16, kFfn);
  const auto w_q6k = random_weights(DType::Q6_K, kVocab / 16, kFfn);
  const auto w_q4k_l2 = random_weights(DType::Q4_K, 256, kFfn);
  const auto w_q6k_l2 = random_weights(DType::Q6_K, 256, kFfn);
  std::printf("detected: %s\n", simd_level_name(detect_simd_level()));
  if (detect_simd_level() >= SimdLevel::AMX) std::printf("amx int8 peak, one thread: %.0f GOP/s\n", amx_int8_gops(1));
  for (SimdLevel level : levels) {
    if (level > detect_simd_level()) continue;
    std::printf("%s:\n", simd_level_name(level));
    if (!prefill_only) {
      bench_decode(level, DType::Q8_0, w_out, kVocab, kEmbd, 1);
      bench_decode_repacked(level, DType::Q8_0, w_out, kVocab, kEmbd, 1);
      bench_decode_repacked(level, DType::Q5_0, w_q5, kVocab / 4, kEmbd, 1);
      bench_decode_repacked(level, DType::Q5_0, w_q5_l2, kFfn / 2, kEmbd, 1);  // in L2
      bench_decode_repacked(level, DType::Q8_0, w_out, kFfn / 2, kEmbd, 1);    // in L2
      bench_decode(level, DType::Q6_K, w_q6k, kVocab / 16, kFfn, 1);
      bench_decode_repacked(level, DType::Q6_K, w_q6k, kVocab / 16, kFfn, 1);
      bench_decode_repacked(level, DType::Q6_K, w_q6k_l2, 256, kFfn, 1);  // in L2
      bench_decode(level, DType::Q5_0, w_q5, kVocab / 4, kEmbd, 1);
      bench_decode(level, DType::Q5_0, w_q5, kVocab / 4, kEmbd, 4);
      bench_decode(level, DType::Q5_0, w_q5_l2, kFfn, kEmbd, 1);  // in L2: the kernel's own speed
      bench_decode(level, DType::Q4_K, w_q4k, kVocab / 16, kFfn, 1);
      bench_decode_repacked(level, DType::Q4_K, w_q4k, kVocab / 16, kFfn, 1);
      bench_decode_repacked(level, DType::Q4_K, w_q4k_l2, 256, kFfn, 1);  // in L2
      bench_decode(level, DType::Q4_K, w_q4k, kVocab / 16, kFfn, 4);
    }
    bench_prefill(level, DType::Q8_0, kFfn, kEmbd, kTokens);
    bench_prefill(level, DType::Q5_0, kFfn, kEmbd, kTokens);  // Q, K, gate, up: 640 -> 2048
    bench_prefill(level, DType::Q5_0, kEmbd, kFfn, kTokens);
    bench_prefill(level, DType::Q4_K, kEmbd, kFfn, kTokens);  // down: 2048 -> 640
    bench_prefill(level, DType::Q6_K, kEmbd, kFfn, kTokens);
    bench_prefill_repacked(level, DType::Q8_0, kFfn, kEmbd, kTokens);
    bench_prefill_repacked(level, DType::Q5_0, kFfn, kEmbd, kTokens);
    bench_prefill_repacked(level, DType::Q5_0, 1024, kEmbd, kTokens);
    bench_prefill_repacked(level, DType::Q5_0, 256, kEmbd, kTokens);
    bench_prefill_repacked(level, DType::Q5_0, 16384, kEmbd, kTokens);
    bench_prefill_repacked(level, DType::Q4_K, kEmbd, kFfn, kTokens);
    bench_prefill_repacked(level, DType::Q6_K, kEmbd, kFfn, kTokens);
  }
  return 0;
}
