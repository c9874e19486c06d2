#include "backends/cpu/repack.h"

#include <cassert>
#include <cstddef>
#include <cstring>
#include <vector>

#include "backends/cpu/quant_ref.h"
#include "backends/cpu/vec_dot_kernels.h"

namespace hearth::cpu {
namespace {

// Where the parts of one plain block sit, and how large its repacked group block is.
struct Q0Layout {
  size_t block_bytes;  // plain block
  size_t qs;           // offset of the quant bytes (16 nibble pairs, or Q8_0's 32) in a plain block
  bool high_bit;       // Q5_0: a 32-bit qh at byte 2
  int quant_dwords;    // 4 (nibbles) or 8 (Q8_0)
  size_t group_block_bytes() const { return kRepackRows * block_bytes; }
  size_t quants_at() const {
    return quant_dwords == 8 ? repack_layout::kQ8Quants : repack_layout::q0_nibbles(high_bit);
  }
};

// Rows [i0, i1) of one 16-row group, block by block: plain rows (row i0 at `plain`) <->
// group blocks. to_repacked (always all 16 rows) picks the direction; every byte is moved,
// none computed, so the round trip is exact.
void convert_group(const Q0Layout& L, int64_t nb, uint8_t* plain, size_t stride, uint8_t* group, bool to_repacked,
                   int64_t i0, int64_t i1) {
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* gb = group + b * L.group_block_bytes();
    uint64_t masks[8] = {};
    if (!to_repacked && L.high_bit) std::memcpy(masks, gb + repack_layout::kQ0Masks, sizeof(masks));
    for (int64_t i = i0; i < i1; ++i) {
      uint8_t* pb = plain + (i - i0) * static_cast<int64_t>(stride) + b * static_cast<int64_t>(L.block_bytes);
      auto move = [&](uint8_t* repacked, uint8_t* p, size_t n) {
        if (to_repacked) {
          std::memcpy(repacked, p, n);
        } else {
          std::memcpy(p, repacked, n);
        }
      };
      move(gb + 2 * i, pb, 2);  // the scale
      for (int k = 0; k < L.quant_dwords; ++k) move(gb + L.quants_at() + 64 * k + 4 * i, pb + L.qs + 4 * k, 4);
      if (!L.high_bit) continue;
      uint32_t qh = 0;
      if (to_repacked) std::memcpy(&qh, pb + 2, 4);
      // Bits 4k .. 4k+3 of qh <-> bits 4i .. 4i+3 of mask k.
      for (int k = 0; k < 8; ++k) {
        if (to_repacked) {
          masks[k] |= static_cast<uint64_t>((qh >> (4 * k)) & 0xFu) << (4 * i);
        } else {
          qh |= static_cast<uint32_t>((masks[k] >> (4 * i)) & 0xFu) << (4 * k);
        }
      }
      if (!to_repacked) std::memcpy(pb + 2, &qh, 4);
    }
    if (to_repacked && L.high_bit) std::memcpy(gb + repack_layout::kQ0Masks, masks, sizeof(masks));
  }
}

// Q4_K: the layout of repack.h.
using repack_layout::kQ4KBlock;
using repack_layout::kQ4KDmin;
using repack_layout::kQ4KMins;
using repack_layout::kQ4KNibbles;
using repack_layout::kQ4KScales;

void convert_group_q4k(int64_t nb, uint8_t* plain, size_t stride, uint8_t* group, bool to_repacked, int64_t i0,
                       int64_t i1) {
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* gb = group + b * static_cast<int64_t>(kQ4KBlock);
    for (int64_t i = i0; i < i1; ++i) {
      uint8_t* pb = plain + (i - i0) * static_cast<int64_t>(stride) + b * static_cast<int64_t>(sizeof(BlockQ4_K));
      uint8_t sc[8], m[8];
      if (to_repacked) {
        std::memcpy(gb + 2 * i, pb, 2);
        std::memcpy(gb + kQ4KDmin + 2 * i, pb + 2, 2);
        for (int j = 0; j < 8; ++j) unpack_scale_min_k4(j, pb + 4, &sc[j], &m[j]);
        for (int j = 0; j < 8; ++j) gb[kQ4KScales + 16 * j + i] = sc[j];
        for (int k = 0; k < 4; ++k) {
          gb[kQ4KMins + 32 * k + 2 * i] = m[2 * k];
          gb[kQ4KMins + 32 * k + 2 * i + 1] = m[2 * k + 1];
        }
      } else {
        std::memcpy(pb, gb + 2 * i, 2);
        std::memcpy(pb + 2, gb + kQ4KDmin + 2 * i, 2);
        for (int j = 0; j < 8; ++j) sc[j] = gb[kQ4KScales + 16 * j + i];
        for (int k = 0; k < 4; ++k) {
          m[2 * k] = gb[kQ4KMins + 32 * k + 2 * i];
          m[2 * k + 1] = gb[kQ4KMins + 32 * k + 2 * i + 1];
        }
        pack_scale_min_k4(sc, m, pb + 4);
      }
      for (int q = 0; q < 32; ++q) {  // quarter q / 8, dword q % 8
        uint8_t* rp = gb + kQ4KNibbles + 64 * q + 4 * i;
        uint8_t* pp = pb + 16 + 4 * q;
        std::memcpy(to_repacked ? rp : pp, to_repacked ? pp : rp, 4);
      }
    }
  }
}

// Q6_K: the layout of repack.h, every byte moved as it is.
void convert_group_q6k(int64_t nb, uint8_t* plain, size_t stride, uint8_t* group, bool to_repacked, int64_t i0,
                       int64_t i1) {
  using namespace repack_layout;
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* gb = group + b * static_cast<int64_t>(kQ6KBlock);
    for (int64_t i = i0; i < i1; ++i) {
      uint8_t* pb = plain + (i - i0) * static_cast<int64_t>(stride) + b * static_cast<int64_t>(sizeof(BlockQ6_K));
      const auto row = static_cast<size_t>(i);
      auto move = [&](size_t repacked_at, size_t plain_at, size_t n) {
        if (to_repacked) {
          std::memcpy(gb + repacked_at, pb + plain_at, n);
        } else {
          std::memcpy(pb + plain_at, gb + repacked_at, n);
        }
      };
      move(2 * row, offsetof(BlockQ6_K, d), 2);
      for (size_t k = 0; k < 8; ++k) move(kQ6KScales + 32 * k + 2 * row, offsetof(BlockQ6_K, scales) + 2 * k, 2);
      for (size_t v = 0; v < 32; ++v) move(kQ6KLow + 64 * v + 4 * row, offsetof(BlockQ6_K, ql) + 4 * v, 4);
      for (size_t v = 0; v < 16; ++v) move(kQ6KHigh + 64 * v + 4 * row, offsetof(BlockQ6_K, qh) + 4 * v, 4);
    }
  }
}

using ConvertFn = void (*)(int64_t nb, uint8_t* plain, size_t stride, uint8_t* group, bool to_repacked, int64_t i0,
                           int64_t i1);

struct Format {
  int64_t block_elems;
  size_t group_block_bytes;  // one block of a 16-row group
  ConvertFn convert;
};

bool format_of(DType w, Format* f) {
  switch (w) {
    case DType::Q4_0:
      *f = {kQk, kRepackRows * sizeof(BlockQ4_0),
            [](int64_t nb, uint8_t* p, size_t s, uint8_t* g, bool to, int64_t i0, int64_t i1) {
              convert_group(Q0Layout{sizeof(BlockQ4_0), 2, false, 4}, nb, p, s, g, to, i0, i1);
            }};
      return true;
    case DType::Q5_0:
      *f = {kQk, kRepackRows * sizeof(BlockQ5_0),
            [](int64_t nb, uint8_t* p, size_t s, uint8_t* g, bool to, int64_t i0, int64_t i1) {
              convert_group(Q0Layout{sizeof(BlockQ5_0), 6, true, 4}, nb, p, s, g, to, i0, i1);
            }};
      return true;
    case DType::Q8_0:
      *f = {kQk, kRepackRows * sizeof(BlockQ8_0),
            [](int64_t nb, uint8_t* p, size_t s, uint8_t* g, bool to, int64_t i0, int64_t i1) {
              convert_group(Q0Layout{sizeof(BlockQ8_0), 2, false, 8}, nb, p, s, g, to, i0, i1);
            }};
      return true;
    case DType::Q4_K:
      *f = {kQkK, kQ4KBlock, convert_group_q4k};
      return true;
    case DType::Q6_K:
      *f = {kQkK, repack_layout::kQ6KBlock, convert_group_q6k};
      return true;
    default:
      return false;
  }
}

Format format_or_die(DType w) {
  Format f{};
  [[maybe_unused]] const bool ok = format_of(w, &f);
  assert(ok);
  return f;
}

// Every 16-row group of `rows` plain rows (stride bytes apart) <-> repacked rows.
void convert_rows(DType w, int64_t n, uint8_t* plain, size_t stride, int64_t rows, uint8_t* repacked,
                  bool to_repacked) {
  const Format f = format_or_die(w);
  assert(rows % kRepackRows == 0);
  const int64_t nb = n / f.block_elems;
  const size_t group_bytes = static_cast<size_t>(nb) * f.group_block_bytes;
  for (int64_t r = 0; r < rows; r += kRepackRows)
    f.convert(nb, plain + r * static_cast<int64_t>(stride), stride, repacked + (r / kRepackRows) * group_bytes,
              to_repacked, 0, kRepackRows);
}

}  // namespace

bool repack_useful(DType w, SimdLevel level, int64_t n, int64_t rows) {
  Format f{};
  return format_of(w, &f) && rows > 0 && rows % kRepackRows == 0 && n > 0 && n % f.block_elems == 0 &&
         detail::gemm_repacked_fn(level, w) != nullptr;
}

size_t repacked_bytes(DType w, int64_t n, int64_t rows) {
  const Format f = format_or_die(w);
  return static_cast<size_t>(rows / kRepackRows) * static_cast<size_t>(n / f.block_elems) * f.group_block_bytes;
}

void repack_rows(DType w, int64_t n, const void* src, size_t stride, int64_t rows, void* dst) {
  convert_rows(w, n, const_cast<uint8_t*>(static_cast<const uint8_t*>(src)), stride, rows, static_cast<uint8_t*>(dst),
               true);
}

void unrepack_rows(DType w, int64_t n, const void* src, int64_t rows, void* dst, size_t stride) {
  convert_rows(w, n, static_cast<uint8_t*>(dst), stride, rows, const_cast<uint8_t*>(static_cast<const uint8_t*>(src)),
               false);
}

void unrepack_row(DType w, int64_t n, const void* R, int64_t row, void* dst) {
  const Format f = format_or_die(w);
  const int64_t nb = n / f.block_elems;
  const int64_t i = row % kRepackRows;
  auto* group = const_cast<uint8_t*>(static_cast<const uint8_t*>(R)) +
                (row / kRepackRows) * static_cast<int64_t>(nb) * static_cast<int64_t>(f.group_block_bytes);
  f.convert(nb, static_cast<uint8_t*>(dst), 0, group, false, i, i + 1);
}

void gemm_repacked_at(SimdLevel level, DType wtype, int64_t n_in, const void* R, int64_t row_begin, int64_t row_end,
                      const void* A, size_t a_stride_bytes, int64_t n_tok, float* Y, size_t y_stride_floats) {
  assert(row_begin % kRepackRows == 0 && row_end % kRepackRows == 0);
  if (row_end <= row_begin || n_tok <= 0) return;
  const size_t group_bytes = repacked_bytes(wtype, n_in, kRepackRows);
  if (detail::GemmFn f = detail::gemm_repacked_fn(level, wtype)) {
    f(detail::GemmArgs{n_in, static_cast<const uint8_t*>(R), group_bytes, row_begin, row_end,
                       static_cast<const uint8_t*>(A), a_stride_bytes, n_tok, Y, y_stride_floats});
    return;
  }
  // No kernel for the layout at this level: each group back to plain rows, then this
  // level's own gemm on them (the same floats, as the contract says).
  const size_t row = row_bytes(wtype, n_in);
  std::vector<uint8_t> plain(kRepackRows * row);
  for (int64_t r = row_begin; r < row_end; r += kRepackRows) {
    unrepack_rows(wtype, n_in, static_cast<const uint8_t*>(R) + (r / kRepackRows) * group_bytes, kRepackRows,
                  plain.data(), row);
    gemm_at(level, wtype, n_in, plain.data(), row, 0, kRepackRows, A, a_stride_bytes, n_tok, Y + r, y_stride_floats);
  }
}

void gemm_repacked(DType wtype, int64_t n_in, const void* R, int64_t row_begin, int64_t row_end, const void* A,
                   size_t a_stride_bytes, int64_t n_tok, float* Y, size_t y_stride_floats) {
  gemm_repacked_at(active_simd_level(), wtype, n_in, R, row_begin, row_end, A, a_stride_bytes, n_tok, Y,
                   y_stride_floats);
}

}  // namespace hearth::cpu
