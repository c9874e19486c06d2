// Every device backend operation but MatMul and Attention (device_matmul_attention_test.cpp)
// against the CPU backend, on random inputs, with the validation layer on and required
// silent. Tolerances are per op, each with its reason. Skipped (with a warning) when no
// device can run hearth. Built once per device backend (device_pair.h).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/fp16.h"
#include "device_pair.h"
#include "malformed_graphs.h"
#include "transfer_contract.h"

namespace {

using namespace hearth;
using hearth::test::expect_close;

}  // namespace

TEST_CASE(DEVICE " transfers land where sent, copy on the device, and refuse bad ranges and foreign buffers",
          DEVICE_TAG) {
  NEED_DEVICE(f);
  std::unique_ptr<Buffer> cpu_buffer = std::move(*f.cpu().alloc(1024, BufferKind::Activations));
  test::check_transfer_contract(f.dev(), cpu_buffer.get());
  f.finish();
}

TEST_CASE(DEVICE " orders writes before the reads, copies and passes after them", DEVICE_TAG) {
  NEED_DEVICE(f);
  test::check_transfer_order(f.dev());
  f.finish();
}

TEST_CASE(DEVICE " and the CPU refuse the same malformed graphs and run the well-formed ones", DEVICE_TAG) {
  NEED_DEVICE(f);
  struct Make {
    test::DevicePair& f;
    Tensor tensor(DType type, int64_t ne0, int64_t rows) {
      return f.tensor(type, ne0, rows, BufferKind::Activations, 0, 0, 0);
    }
  } make{f};
  for (const test::GraphCase& c : test::malformed_graphs(make)) {
    INFO(c.name);
    const auto [cpu_good, vk_good] = f.try_run(c.good);
    CHECK(cpu_good.ok());
    INFO((vk_good ? std::string() : vk_good.error().message));
    CHECK(vk_good.ok());
    const auto [cpu_bad, vk_bad] = f.try_run(c.bad);
    CHECK_FALSE(cpu_bad.ok());
    CHECK_FALSE(vk_bad.ok());
    if (!cpu_bad && !vk_bad) {  // the same complaint, from the shared check, after "cpu: " / "vulkan: "
      const auto complaint = [](const Status& st) {
        const std::string& m = st.error().message;
        return m.substr(m.find(": ") + 2);
      };
      CHECK(complaint(cpu_bad) == complaint(vk_bad));
    }
  }
  f.finish();
}

TEST_CASE(DEVICE " GetRows equals the CPU's for every weight type", DEVICE_TAG) {
  NEED_DEVICE(f);
  // 512 columns: a whole number of blocks of every type; 640 as well for the 32-blocks.
  for (DType type : kWeightTypes) {
    if (!f.dev().caps().supports_weight(type)) {
      WARN(DEVICE " backend does not support " << dtype_name(type) << " weights");
      continue;
    }
    for (int64_t d : {int64_t{512}, int64_t{640}}) {
      if (d % dtype_info(type).block_elems != 0) continue;
      const int64_t n = 9;
      Tensor table = f.weights(type, d, n, f.random(n * d), nullptr);
      Op op{OpKind::GetRows};
      op.src0 = table;
      op.dst = f.tensor(DType::F32, d, 4);
      op.f0 = 25.3f;  // Gemma scales its embeddings by sqrt(n_embd)
      f.run(op, {8, 0, 8, 3});
      // The dequantization formulas are the same products and sums as the CPU's; a GPU
      // may fuse a multiply and add (one rounding instead of two), so allow a few f32 ulps
      // of the largest value in the row.
      const std::vector<float> c = f.read_cpu(op.dst), v = f.read_dev(op.dst);
      float amax = 0;
      for (float x : c) amax = std::max(amax, std::fabs(x));
      expect_close(
          c, v, [&](size_t) { return 4e-7 * amax; },
          std::string("GetRows ") + dtype_name(type) + " d=" + std::to_string(d));
    }
  }
  f.finish();
}

TEST_CASE(DEVICE " RmsNorm equals the CPU's over whole rows and per head, in place too", DEVICE_TAG) {
  NEED_DEVICE(f);
  // Whole rows of 640 and 1152 (Gemma widths), heads of 256 and 64, and a lone token.
  struct Shape {
    int64_t width, chunk, rows;
  };
  for (Shape s : {Shape{640, 640, 7}, Shape{1152, 1152, 1}, Shape{1024, 256, 5}, Shape{256, 64, 3}, Shape{40, 40, 2}}) {
    for (bool in_place : {false, true}) {
      const std::vector<float> x = f.random(s.width * s.rows, 3.0f), w = f.random(s.chunk);
      Op op{OpKind::RmsNorm};
      op.src0 = f.f32(s.width, s.rows, x);
      op.src1 = f.f32(s.chunk, 1, w);
      op.dst = in_place ? op.src0 : f.tensor(DType::F32, s.width, s.rows);
      op.f0 = 1e-6f;
      f.run(op);
      // The sum of squares is accumulated in another order (a tree on the GPU): relative
      // error a few times n * 2^-24 at worst, far less in practice.
      const std::vector<float> c = f.read_cpu(op.dst), v = f.read_dev(op.dst);
      expect_close(
          c, v, [&](size_t i) { return 2e-6 * std::fabs(c[i]) + 1e-6; },
          "RmsNorm width " + std::to_string(s.width) + " chunk " + std::to_string(s.chunk) +
              (in_place ? " in place" : ""));
    }
  }
  f.finish();
}

TEST_CASE(DEVICE " RoPE equals the CPU's in the normal, neox and partial layouts", DEVICE_TAG) {
  NEED_DEVICE(f);
  const std::vector<int32_t> pos{0, 1, 7, 100, 1000, 4095, 31999};
  const int64_t n_tok = static_cast<int64_t>(pos.size());
  struct Case {
    int64_t head_dim, n_rot, n_heads;
    int32_t layout;
    float base, scale;
  };
  for (Case c : {Case{256, 256, 4, kRopeNeox, 1e6f, 0.125f}, Case{256, 256, 1, kRopeNeox, 1e4f, 1.0f},
                 Case{64, 64, 3, kRopeNormal, 1e4f, 1.0f}, Case{128, 96, 2, kRopeNormal, 5e5f, 1.0f},
                 Case{80, 40, 2, kRopeNeox, 1e4f, 0.5f}}) {
    const std::vector<float> x = f.random(n_tok * c.n_heads * c.head_dim);
    Op op{OpKind::Rope};
    op.dst = f.f32(c.n_heads * c.head_dim, n_tok, x);
    op.i0 = static_cast<int32_t>(c.head_dim);
    op.i1 = static_cast<int32_t>(c.n_rot);
    op.i2 = c.layout;
    op.f0 = c.base;
    op.f1 = c.scale;
    f.run(op, pos);
    // theta = pos * scale * base^(-2j/n_rot) in f32 on both; the GPU's sin and cos may be
    // less exact than libm (Vulkan allows 2^-11 absolute in [-pi, pi], and the argument
    // reduction loses about pos * 2^-24 of theta): the error is bounded by the rotated
    // pair's magnitude times that.
    const std::vector<float> cv = f.read_cpu(op.dst), vv = f.read_dev(op.dst);
    expect_close(
        cv, vv,
        [&](size_t i) {
          const int64_t t = static_cast<int64_t>(i) / (c.n_heads * c.head_dim);
          return (1e-3 + 2e-7 * pos[t] * c.scale) * 4.0;
        },
        "RoPE head_dim " + std::to_string(c.head_dim) + " n_rot " + std::to_string(c.n_rot) +
            (c.layout == kRopeNeox ? " neox" : " normal"));
  }
  f.finish();
}

TEST_CASE(DEVICE " elementwise ops equal the CPU's, on strided views and in place", DEVICE_TAG) {
  NEED_DEVICE(f);
  const int64_t width = 2048 + 40, rows = 3;
  std::vector<float> a = f.random(width * rows, 3.0f), b = f.random(width * rows);
  a[0] = -12.5f;  // GELU's clamps
  a[1] = 30.0f;
  for (OpKind kind : {OpKind::Add, OpKind::Scale, OpKind::GeluMul, OpKind::SiluMul, OpKind::Softcap}) {
    for (bool strided : {false, true}) {
      // Strided: rows 64 bytes further apart than their length, 256 bytes into the buffer.
      const size_t stride = strided ? width * 4 + 64 : 0, offset = strided ? 256 : 0;
      Op op{kind};
      op.src0 = f.f32(width, rows, a, stride, offset);
      op.src1 = f.f32(width, rows, b, stride, offset);
      op.dst = strided ? op.src0 : f.tensor(DType::F32, width, rows);  // strided also in place
      op.f0 = kind == OpKind::Softcap ? 5.0f : 0.125f;
      f.run(op);
      const std::vector<float> c = f.read_cpu(op.dst), v = f.read_dev(op.dst);
      auto tol = [&](size_t i) -> double {
        switch (kind) {
          // One rounded add or multiply on both sides.
          case OpKind::Add:
          case OpKind::Scale:
            return 1.2e-7 * std::fabs(c[i]);
          // The CPU reads GELU from an f16 table (x and gelu(x) rounded to f16, relative
          // step 2^-11); the GPU may compute it in f32: up to ~2e-3 of |x * b|.
          case OpKind::GeluMul:
            return 2e-3 * std::fabs(double(a[i]) * b[i]) + 1e-6;
          // exp and division on the GPU: a few ulps each (Vulkan: exp within 3 + 2|x| ulp).
          case OpKind::SiluMul:
            return 2e-6 * (1 + std::fabs(a[i])) * std::fabs(double(a[i]) * b[i]) + 1e-7;
          // tanh on the GPU may be computed through exp, losing absolute (not relative)
          // precision near 0: 1e-6 of the cap.
          default:
            return 1e-6 * 5.0 + 2e-6 * std::fabs(c[i]);
        }
      };
      expect_close(c, v, tol, std::string("elementwise op ") + std::to_string(int(kind)) + (strided ? " strided" : ""));
    }
  }
  f.finish();
}

TEST_CASE(DEVICE " AddRow adds the same bias row as the CPU, on strided views and in place", DEVICE_TAG) {
  NEED_DEVICE(f);
  // Qwen2.5-0.5B's bias widths (q 896, k/v 128) and an odd one; 1 and 7 rows (decode, batch).
  for (int64_t width : {int64_t{896}, int64_t{128}, int64_t{37}}) {
    for (int64_t rows : {int64_t{1}, int64_t{7}}) {
      for (bool strided : {false, true}) {
        const size_t stride = strided ? width * 4 + 64 : 0, offset = strided ? 256 : 0;
        const std::vector<float> a = f.random(width * rows, 3.0f), bias = f.random(width);
        Op op{OpKind::AddRow};
        op.src0 = f.f32(width, rows, a, stride, offset);
        op.src1 = f.f32(width, 1, bias, 0, strided ? 128 : 0);
        op.dst = strided ? op.src0 : f.tensor(DType::F32, width, rows);  // strided also in place
        f.run(op);
        // One rounded f32 add on both sides (as for Add); every row got the bias.
        const std::vector<float> c = f.read_cpu(op.dst), v = f.read_dev(op.dst);
        for (int64_t r = 0; r < rows; ++r) CHECK(c[r * width + 5] == a[r * width + 5] + bias[5]);
        expect_close(
            c, v, [&](size_t i) { return 1.2e-7 * std::fabs(c[i]); },
            "AddRow width " + std::to_string(width) + " rows " + std::to_string(rows) + (strided ? " strided" : ""));
      }
    }
  }
  f.finish();
}

TEST_CASE(DEVICE " StoreKv writes the same F32 and F16 cache rows as the CPU", DEVICE_TAG) {
  NEED_DEVICE(f);
  const int64_t width = 256, n_slots = 40;
  const std::vector<int32_t> slots{17, 3, 39, 0, 22, 5, 6};  // any order, any gaps
  const int64_t n_tok = static_cast<int64_t>(slots.size());
  for (DType type : {DType::F16, DType::F32}) {
    const std::vector<float> k = f.random(n_tok * width, 2.0f), v = f.random(n_tok * width, 2.0f);
    Op op{OpKind::StoreKv};
    op.src0 = f.f32(width, n_tok, k);
    op.src1 = f.f32(width, n_tok, v);
    op.src2 = f.tensor(type, width, n_slots, BufferKind::KvCache);
    op.src3 = f.tensor(type, width, n_slots, BufferKind::KvCache, 0, 128);  // V 128 bytes into its buffer
    f.run(op, slots);
    for (const Tensor& cache : {op.src2, op.src3}) {
      const std::vector<uint8_t> cb = f.bytes_cpu(cache), vb = f.bytes_dev(cache);
      REQUIRE(cb.size() == vb.size());
      if (type == DType::F32) {
        // A copy: bit for bit, the untouched slots (still the fill pattern) included.
        CHECK(cb == vb);
        continue;
      }
      // f32 -> f16 on the GPU may round toward zero instead of to nearest: at most one
      // f16 step apart. Untouched bytes must be equal.
      size_t bad = 0;
      for (size_t i = 0; i + 1 < cb.size(); i += 2) {
        uint16_t hc, hv;
        std::memcpy(&hc, &cb[i], 2);
        std::memcpy(&hv, &vb[i], 2);
        const int diff = std::abs(int(hc) - int(hv));
        if (diff > 1 || ((hc ^ hv) & 0x8000)) ++bad;
      }
      INFO("F16 cache elements more than one f16 step from the CPU's: " << bad);
      CHECK(bad == 0);
    }
  }
  f.finish();
}

TEST_CASE(DEVICE " StoreKv quantizes Q8_0 cache rows as the CPU does", DEVICE_TAG) {
  NEED_DEVICE(f);
  const int64_t width = 256, n_slots = 24;
  const std::vector<int32_t> slots{9, 0, 23, 4, 5};
  const int64_t n_tok = static_cast<int64_t>(slots.size());
  std::vector<float> k = f.random(n_tok * width, 2.0f), v = f.random(n_tok * width, 0.5f);
  std::fill(k.begin() + 32, k.begin() + 64, 0.0f);  // an all-zero block
  k[100] = 7.5f;                                    // a block whose maximum is one element
  Op op{OpKind::StoreKv};
  op.src0 = f.f32(width, n_tok, k);
  op.src1 = f.f32(width, n_tok, v);
  op.src2 = f.tensor(DType::Q8_0, width, n_slots, BufferKind::KvCache);
  op.src3 = f.tensor(DType::Q8_0, width, n_slots, BufferKind::KvCache, 0, 128);
  f.run(op, slots);
  for (const Tensor& cache : {op.src2, op.src3}) {
    const std::vector<uint8_t> cb = f.bytes_cpu(cache), vb = f.bytes_dev(cache);
    REQUIRE(cb.size() == vb.size());
    // Blocks of 34 bytes: the f16 scale within one f16 step (the GPU's f32 -> f16 may round
    // toward zero), each q within one step (its 1 / d may be off by an ulp, which moves a
    // value sitting on a rounding boundary). Untouched slots (the fill pattern) are equal.
    size_t bad = 0;
    for (size_t b = cache.offset; b + 34 <= cb.size(); b += 34) {
      uint16_t dc, dv;
      std::memcpy(&dc, &cb[b], 2);
      std::memcpy(&dv, &vb[b], 2);
      if (std::abs(int(dc) - int(dv)) > 1) ++bad;
      for (size_t i = 2; i < 34; ++i)
        if (std::abs(int(int8_t(cb[b + i])) - int(int8_t(vb[b + i]))) > 1) ++bad;
    }
    INFO("Q8_0 scales or values more than one step from the CPU's: " << bad);
    CHECK(bad == 0);
  }
  f.finish();
}

TEST_CASE(DEVICE " CopyRows picks the same rows as the CPU", DEVICE_TAG) {
  NEED_DEVICE(f);
  const int64_t width = 262144 / 4 + 3, rows = 5;  // a logits-sized row
  const std::vector<float> x = f.random(width * rows);
  Op op{OpKind::CopyRows};
  op.src0 = f.f32(width, rows, x);
  op.dst = f.tensor(DType::F32, width, 3);
  f.run(op, {4, 0, 4});
  CHECK(f.read_cpu(op.dst) == f.read_dev(op.dst));
  f.finish();
}
