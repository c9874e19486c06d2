// Row-interleaved ("repacked") weight layouts: the CPU backend copies the weights that
// MatMul reads into them once at load (CpuBackend::prepare_matmul_weights), so its kernels
// find 16 rows' quants already in the order one 512-bit register holds them, instead of
// transposing them at every use. The values and the arithmetic are those of the plain
// rows: gemm_repacked returns, bit for bit, what gemm() returns on the rows they came from.
//
// Q4_0 / Q5_0, per 16-row group and per block b of 32 elements (blocks in order, groups in
// order; kRepackRows * block bytes each, the size of the plain rows):
//   16 x f16   the rows' scales, row i at 2i
//   (Q5_0) 8 x u64 fifth bits: bit 4i + m of mask k = bit 4k + m of row i's qh
//   4 x 64 B   the nibbles: bytes 4i .. 4i+3 of vector k = qs bytes 4k .. 4k+3 of row i
//              (low nibbles: elements 4k .. 4k+3; high nibbles: 16 + 4k .. 16 + 4k+3)
//
// Q8_0, per 16-row group and block (544 bytes, the size of the plain rows):
//   16 x f16   the rows' scales
//   8 x 64 B   the quants: bytes 4i .. 4i+3 of vector k = qs bytes 4k .. 4k+3 of row i
//
// Q4_K, per 16-row group and super-block (2,368 bytes: the 12 packed scale bytes of a row
// become 16, +2.8%):
//   16 x f16 d, 16 x f16 dmin
//   8 x 16 B   the 6-bit scales: byte i of vector j = sc[j] of row i
//   4 x 32 B   the mins as pairs: bytes 2i, 2i+1 of vector k = m[2k], m[2k+1] of row i
//   32 x 64 B  the nibbles: vector 8p + k holds dword k of qs quarter p of row i at bytes
//              4i .. 4i+3 (low nibbles: sub-block 2p, high: 2p + 1)
//
// Q6_K, per 16-row group and super-block (3,360 bytes, the size of the plain rows):
//   16 x f16   d
//   8 x 32 B   the scales as pairs: bytes 2i, 2i+1 of vector k = scales[2k], scales[2k+1] of row i
//   32 x 64 B  ql: vector 8p + k holds bytes 32p + 4k .. 32p + 4k+3 of row i's ql at 4i
//   16 x 64 B  qh: vector 8h + k holds bytes 32h + 4k .. 32h + 4k+3 of row i's qh at 4i
//   (element 128h + 32s + 4k + m of row i: the nibble of ql vector 8(2h + s % 2) + k, low
//   for s < 2; its high bits at 2s of qh vector 8h + k; byte 4i + m of both)
//
// Thread-safety: all functions are reentrant.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/cpu/vec_dot.h"
#include "common/dtype.h"

namespace hearth::cpu {

inline constexpr int64_t kRepackRows = 16;

// Byte offsets inside one block of a repacked group (the layouts above), for repack.cpp
// and the kernels that read them.
namespace repack_layout {
inline constexpr size_t kQ0Masks = 32;   // Q5_0's fifth bits, after the 16 scales
inline constexpr size_t kQ8Quants = 32;  // Q8_0's quant vectors, after the 16 scales
constexpr size_t q0_nibbles(bool high_bit) {
  return high_bit ? kQ0Masks + 64 : kQ0Masks;
}
inline constexpr size_t kQ4KDmin = 32, kQ4KScales = 64, kQ4KMins = 192, kQ4KNibbles = 320;
inline constexpr size_t kQ4KBlock = kQ4KNibbles + 32 * 64;
inline constexpr size_t kQ6KScales = 32, kQ6KLow = 288, kQ6KHigh = kQ6KLow + 32 * 64;
inline constexpr size_t kQ6KBlock = kQ6KHigh + 16 * 64;
}  // namespace repack_layout

// Whether a tensor of `rows` rows of n elements of type w has a repacked layout whose
// kernel at `level` is faster than the plain rows' (today: Q4_0, Q5_0, Q8_0, Q4_K and Q6_K
// at AVX-512; Q4_0, Q5_0, Q8_0 and Q4_K at AVX2).
bool repack_useful(DType w, SimdLevel level, int64_t n, int64_t rows);

// Bytes of the repacked form of `rows` rows (a multiple of kRepackRows) of n elements: the
// same as the plain rows for Q4_0 / Q5_0 / Q8_0 / Q6_K, 2.8% more for Q4_K.
size_t repacked_bytes(DType w, int64_t n, int64_t rows);

// `rows` plain rows (consecutive rows `stride` bytes apart) into dst (repacked_bytes).
void repack_rows(DType w, int64_t n, const void* src, size_t stride, int64_t rows, void* dst);
// The exact inverse: repacked rows back to plain rows `stride` bytes apart.
void unrepack_rows(DType w, int64_t n, const void* src, int64_t rows, void* dst, size_t stride);
// Plain row `row` of repacked rows R (any row: GetRows of a repacked table) into dst.
void unrepack_row(DType w, int64_t n, const void* R, int64_t row, void* dst);

// gemm() of the rows [row_begin, row_end) of repacked weights R (both multiples of
// kRepackRows), at the active level: the same
// floats gemm() writes for the plain rows. Levels without a kernel for the layout unpack
// each group to plain rows and run their own gemm.
void gemm_repacked(DType wtype, int64_t n_in, const void* R, int64_t row_begin, int64_t row_end, const void* A,
                   size_t a_stride_bytes, int64_t n_tok, float* Y, size_t y_stride_floats);
void gemm_repacked_at(SimdLevel level, DType wtype, int64_t n_in, const void* R, int64_t row_begin, int64_t row_end,
                      const void* A, size_t a_stride_bytes, int64_t n_tok, float* Y, size_t y_stride_floats);

}  // namespace hearth::cpu
