// Every CPU backend operation against a plain double-precision formula written here, on
// random inputs, at every SIMD level this CPU has. These are the references the GPU
// backends will be compared with op by op.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "backends/cpu/attention_kernels.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/ops.h"
#include "backends/cpu/quant_ref.h"
#include "backends/cpu/vec_dot.h"
#include "common/fp16.h"
#include "malformed_graphs.h"
#include "quant/quant_test_util.h"
#include "transfer_contract.h"

namespace {

using namespace hearth;

struct Fixture {
  std::unique_ptr<Backend> be = cpu::make_cpu_backend({2});
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::mt19937 rng{1234};

  Tensor make(DType type, int64_t ne0, int64_t rows) {
    Tensor t;
    t.type = type;
    t.ne0 = ne0;
    t.rows = rows;
    t.row_stride = row_bytes(type, ne0);
    buffers.push_back(std::move(*be->alloc(t.row_stride * rows, BufferKind::Activations)));
    t.buffer = buffers.back().get();
    return t;
  }
  Tensor make_f32(int64_t ne0, int64_t rows, const std::vector<float>& v) {
    Tensor t = make(DType::F32, ne0, rows);
    REQUIRE(be->write(*t.buffer, 0, v.data(), v.size() * sizeof(float)).ok());
    return t;
  }
  std::vector<float> random(size_t n, float scale = 1.0f) {
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
  }
  std::vector<float> read(const Tensor& t) {
    std::vector<float> v(static_cast<size_t>(t.ne0 * t.rows));
    REQUIRE(be->read(*t.buffer, t.offset, v.data(), v.size() * sizeof(float)).ok());
    return v;
  }
  void run(const Op& op, std::vector<int32_t> ints_a = {}, std::vector<int32_t> ints_b = {}) {
    Graph g;
    Op o = op;
    o.ia = g.add_ints(ints_a);
    o.ib = g.add_ints(ints_b);
    g.ops.push_back(o);
    REQUIRE(be->execute(g).ok());
  }
};

struct LevelGuard {
  cpu::SimdLevel saved = cpu::active_simd_level();
  ~LevelGuard() { cpu::set_simd_level(saved); }
};

}  // namespace

TEST_CASE("CPU transfers land where sent, copy on the device, and refuse bad ranges and foreign buffers") {
  // A buffer the CPU backend did not make: device memory it cannot address.
  struct Foreign final : Buffer {
    size_t bytes() const override { return 1024; }
  } foreign;
  auto be = cpu::make_cpu_backend({1});
  test::check_transfer_contract(*be, &foreign);
  test::check_transfer_order(*be);
}

TEST_CASE("CPU execute refuses every malformed graph and runs the well-formed one it was spoiled from") {
  struct Make {
    Fixture& f;
    Tensor tensor(DType type, int64_t ne0, int64_t rows) {
      Tensor t = f.make(type, ne0, rows);
      std::vector<uint8_t> zero(t.row_stride * static_cast<size_t>(rows));
      REQUIRE(f.be->write(*t.buffer, 0, zero.data(), zero.size()).ok());
      return t;
    }
  };
  Fixture f;
  Make make{f};
  for (const test::GraphCase& c : test::malformed_graphs(make)) {
    INFO(c.name);
    const Status good = f.be->execute(c.good);
    INFO((good ? std::string() : good.error().message));
    CHECK(good.ok());
    const Status bad = f.be->execute(c.bad);
    CHECK_FALSE(bad.ok());
    if (!bad) CHECK_THAT(bad.error().message, Catch::StartsWith("cpu: op 0 ("));
  }
}

TEST_CASE("RmsNorm normalises each row, or each head of a row, and applies the weight") {
  Fixture f;
  const int64_t rows = 3, width = 96;
  for (int64_t chunk : {width, int64_t{32}}) {
    std::vector<float> x = f.random(rows * width), w = f.random(chunk);
    Op op{OpKind::RmsNorm};
    op.src0 = f.make_f32(width, rows, x);
    op.src1 = f.make_f32(chunk, 1, w);
    op.dst = f.make(DType::F32, width, rows);
    op.f0 = 1e-6f;
    f.run(op);
    std::vector<float> y = f.read(op.dst);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < width / chunk; ++c) {
        double ss = 0;
        for (int64_t k = 0; k < chunk; ++k) ss += double(x[r * width + c * chunk + k]) * x[r * width + c * chunk + k];
        const double s = 1.0 / std::sqrt(ss / chunk + 1e-6);
        for (int64_t k = 0; k < chunk; ++k) {
          const int64_t i = r * width + c * chunk + k;
          REQUIRE(y[i] == Approx(x[i] * s * w[k]).epsilon(1e-5).margin(1e-6));
        }
      }
  }
}

TEST_CASE("RoPE rotates pairs by pos * base^(-2j/n_rot) in both layouts") {
  Fixture f;
  const int64_t head_dim = 16, n_heads = 2, n_tok = 3;
  for (int32_t layout : {kRopeNormal, kRopeNeox}) {
    std::vector<float> x = f.random(n_tok * n_heads * head_dim);
    const std::vector<int32_t> pos{0, 7, 1000};
    Op op{OpKind::Rope};
    op.dst = f.make_f32(n_heads * head_dim, n_tok, x);
    op.i0 = head_dim;
    op.i1 = 12;  // partial rotation: the last 4 dims pass through
    op.i2 = layout;
    op.f0 = 10000.0f;
    op.f1 = 0.5f;
    f.run(op, pos);
    std::vector<float> y = f.read(op.dst);
    for (int64_t t = 0; t < n_tok; ++t)
      for (int64_t h = 0; h < n_heads; ++h) {
        const float* xi = &x[(t * n_heads + h) * head_dim];
        const float* yi = &y[(t * n_heads + h) * head_dim];
        for (int64_t j = 0; j < 6; ++j) {
          const double theta = pos[t] * 0.5 * std::pow(10000.0, -2.0 * j / 12);
          const int64_t a = layout == kRopeNeox ? j : 2 * j, b = layout == kRopeNeox ? j + 6 : 2 * j + 1;
          // float accumulation of theta: tolerance grows with position
          const double tol = 1e-4 + 3e-6 * pos[t];
          REQUIRE(yi[a] == Approx(xi[a] * std::cos(theta) - xi[b] * std::sin(theta)).margin(tol));
          REQUIRE(yi[b] == Approx(xi[a] * std::sin(theta) + xi[b] * std::cos(theta)).margin(tol));
        }
        for (int64_t k = 12; k < head_dim; ++k) REQUIRE(yi[k] == xi[k]);
      }
  }
}

TEST_CASE("Elementwise ops follow their formulas") {
  Fixture f;
  std::vector<float> a = f.random(2 * 40), b = f.random(2 * 40);
  for (OpKind kind : {OpKind::Add, OpKind::Scale, OpKind::GeluMul, OpKind::SiluMul, OpKind::Softcap}) {
    Op op{kind};
    op.src0 = f.make_f32(40, 2, a);
    op.src1 = f.make_f32(40, 2, b);
    op.dst = f.make(DType::F32, 40, 2);
    op.f0 = 1.5f;
    f.run(op);
    std::vector<float> y = f.read(op.dst);
    for (size_t i = 0; i < a.size(); ++i) {
      const double x = a[i], c = b[i];
      double want = 0;
      switch (kind) {
        case OpKind::Add:
          want = x + c;
          break;
        case OpKind::Scale:
          want = x * 1.5;
          break;
        case OpKind::GeluMul:
          want = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))) * c;
          break;
        case OpKind::SiluMul:
          want = x / (1 + std::exp(-x)) * c;
          break;
        case OpKind::Softcap:
          want = 1.5 * std::tanh(x / 1.5);
          break;
        default:
          break;
      }
      // GELU goes through an f16 table as in ggml: x and gelu(x) are rounded to f16
      // (relative step 2^-11), which moves the result by at most ~2e-3 of |x c|.
      const double tol = kind == OpKind::GeluMul ? 2e-3 * std::fabs(x * c) + 1e-6 : 1e-5 * std::fabs(want) + 1e-6;
      REQUIRE(std::fabs(y[i] - want) <= tol);
    }
  }
}

TEST_CASE("AddRow adds row 0 of src1 to every row of src0, in place too") {
  Fixture f;
  const int64_t width = 37, rows = 5;
  const std::vector<float> a = f.random(rows * width), bias = f.random(2 * width);
  for (bool in_place : {false, true}) {
    Op op{OpKind::AddRow};
    op.src0 = f.make_f32(width, rows, a);
    op.src1 = f.make_f32(width, 2, bias);  // a second row that must be ignored
    op.dst = in_place ? op.src0 : f.make(DType::F32, width, rows);
    f.run(op);
    const std::vector<float> y = f.read(op.dst);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < width; ++k) REQUIRE(y[r * width + k] == a[r * width + k] + bias[k]);  // one f32 add
  }
}

TEST_CASE("GetRows dequantizes the selected rows and scales them") {
  Fixture f;
  const int64_t d = 64, n = 10;
  std::vector<float> table = f.random(n * d);
  Tensor t = f.make(DType::Q8_0, d, n);
  std::vector<uint8_t> q(t.row_stride * n);
  for (int64_t r = 0; r < n; ++r) cpu::quantize_row(DType::Q8_0, &table[r * d], q.data() + r * t.row_stride, d);
  REQUIRE(f.be->write(*t.buffer, 0, q.data(), q.size()).ok());
  Op op{OpKind::GetRows};
  op.src0 = t;
  op.dst = f.make(DType::F32, d, 3);
  op.f0 = 2.0f;
  f.run(op, {7, 0, 7});
  std::vector<float> y = f.read(op.dst);
  std::vector<float> row(d);
  for (int i = 0; i < 3; ++i) {
    const int r = i == 1 ? 0 : 7;
    cpu::dequantize_row(DType::Q8_0, q.data() + r * t.row_stride, row.data(), d);
    for (int64_t k = 0; k < d; ++k) REQUIRE(y[i * d + k] == row[k] * 2.0f);
  }
}

TEST_CASE("MatMul of every weight type matches the dequantized product at every SIMD level") {
  LevelGuard guard;
  Fixture f;
  const int64_t n_in = 512, n_out = 37, n_tok = 5;
  for (DType wt : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                   DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    std::vector<float> w = f.random(n_out * n_in, 0.5f), x = f.random(n_tok * n_in);
    Tensor wt_t = f.make(wt, n_in, n_out);
    std::vector<uint8_t> q(wt_t.row_stride * n_out);
    std::vector<float> wd(n_in * n_out);
    for (int64_t r = 0; r < n_out; ++r) {
      cpu::quantize_row(wt, &w[r * n_in], q.data() + r * wt_t.row_stride, n_in);
      cpu::dequantize_row(wt, q.data() + r * wt_t.row_stride, &wd[r * n_in], n_in);
    }
    REQUIRE(f.be->write(*wt_t.buffer, 0, q.data(), q.size()).ok());
    for (cpu::SimdLevel level : test::supported_levels()) {
      cpu::set_simd_level(level);
      Op op{OpKind::MatMul};
      op.src0 = wt_t;
      op.src1 = f.make_f32(n_in, n_tok, x);
      op.dst = f.make(DType::F32, n_out, n_tok);
      f.run(op);
      std::vector<float> y = f.read(op.dst);
      for (int64_t t = 0; t < n_tok; ++t)
        for (int64_t o = 0; o < n_out; ++o) {
          double want = 0, norm = 0;
          for (int64_t i = 0; i < n_in; ++i) {
            want += double(wd[o * n_in + i]) * x[t * n_in + i];
            norm += std::fabs(double(wd[o * n_in + i]) * x[t * n_in + i]);
          }
          // Activations are quantized to 8 bits (relative step 1/127 of a block's max):
          // the error is bounded by a small share of sum |w x|.
          INFO(dtype_name(wt) << " level " << cpu::simd_level_name(level));
          REQUIRE(std::fabs(y[t * n_out + o] - want) <= 0.01 * norm + 1e-4);
        }
    }
  }
}

// prepare_matmul_weights may re-layout weights (Q4_0 / Q5_0 / Q8_0 / Q4_K / Q6_K rows interleaved at
// AVX-512): MatMul on the prepared views, and on a view of their first 16 rows, must give the
// same floats as on a backend that kept the plain rows, and GetRows the same rows (a tied
// output's table is prepared); views that were not prepared are read as they are.
TEST_CASE("MatMul on weights prepared for MatMul gives the unprepared floats bit for bit") {
  LevelGuard guard;
  Fixture plain, prepared;
  const int64_t n_in = 1024, n_out = 48;
  for (DType wt : {DType::Q4_0, DType::Q5_0, DType::Q4_K, DType::Q8_0, DType::Q6_K}) {
    INFO(dtype_name(wt));
    const std::vector<float> w = plain.random(2 * n_out * n_in, 0.5f);
    const size_t row = row_bytes(wt, n_in);
    std::vector<uint8_t> q(row * 2 * n_out);
    for (int64_t r = 0; r < 2 * n_out; ++r) cpu::quantize_row(wt, &w[r * n_in], q.data() + r * row, n_in);
    // One weights buffer holding two tensors; only the first is prepared.
    std::vector<std::unique_ptr<Buffer>> wbufs;
    Tensor first[2], second[2];
    Fixture* fx[2] = {&plain, &prepared};
    for (int i = 0; i < 2; ++i) {
      wbufs.push_back(std::move(*fx[i]->be->upload_weights(q.data(), q.size())));
      first[i] = Tensor{wbufs.back().get(), 0, wt, n_in, n_out, row};
      second[i] = first[i];
      second[i].offset = row * n_out;
    }
    REQUIRE(prepared.be->prepare_matmul_weights(std::span<const Tensor>(&first[1], 1), false).ok());
    REQUIRE(std::memcmp(wbufs[1]->host_data(), q.data(), q.size()) == 0);  // the caller's memory is untouched
    {
      std::vector<float> rows[2];
      for (int i = 0; i < 2; ++i) {
        Op op{OpKind::GetRows};
        op.src0 = first[i];
        op.dst = fx[i]->make(DType::F32, n_in, 4);
        fx[i]->run(op, {0, 17, 47, 17});
        rows[i] = fx[i]->read(op.dst);
      }
      REQUIRE(std::memcmp(rows[0].data(), rows[1].data(), rows[0].size() * sizeof(float)) == 0);
    }
    for (cpu::SimdLevel level : test::supported_levels()) {
      cpu::set_simd_level(level);
      for (int64_t n_tok : {1, 3, 7, 40}) {
        INFO("level " << cpu::simd_level_name(level) << " tokens " << n_tok);
        const std::vector<float> x = plain.random(n_tok * n_in);
        for (int view = 0; view < 3; ++view) {
          std::vector<float> y[2];
          for (int i = 0; i < 2; ++i) {
            Op op{OpKind::MatMul};
            op.src0 = view == 0 ? first[i] : view == 1 ? first[i].slice_rows(0, 16) : second[i];
            op.src1 = fx[i]->make_f32(n_in, n_tok, x);
            op.dst = fx[i]->make(DType::F32, op.src0.rows, n_tok);
            fx[i]->run(op);
            y[i] = fx[i]->read(op.dst);
          }
          REQUIRE(std::memcmp(y[0].data(), y[1].data(), y[0].size() * sizeof(float)) == 0);
        }
      }
    }
  }
}

TEST_CASE("MatMuls that read one input run as one job and give each op's own result bit for bit") {
  // A layer's Q, K and V (and gate and up) share a job (ops.h, op_matmuls): each output
  // must be what its op alone gives, whatever chunks the group's split gave its rows.
  LevelGuard guard;
  Fixture f;
  const int64_t n_in = 512;
  // Q5_0 and Q8_0 share Q8_0 activations (one group); Q4_K's differ (a group of its own).
  const std::vector<std::pair<DType, int64_t>> shapes = {
      {DType::Q5_0, 96}, {DType::Q8_0, 16}, {DType::Q5_0, 48}, {DType::Q4_K, 32}, {DType::Q6_K, 16}};
  std::vector<Tensor> weights;
  for (auto [wt, rows] : shapes) {
    const std::vector<float> w = f.random(rows * n_in, 0.5f);
    weights.push_back(f.make(wt, n_in, rows));
    std::vector<uint8_t> q(weights.back().row_stride * rows);
    for (int64_t r = 0; r < rows; ++r)
      cpu::quantize_row(wt, &w[r * n_in], q.data() + r * weights.back().row_stride, n_in);
    REQUIRE(f.be->write(*weights.back().buffer, 0, q.data(), q.size()).ok());
  }
  // The first group's weights repacked where this CPU's kernels use it, the second's not.
  REQUIRE(f.be->prepare_matmul_weights(std::span<const Tensor>(weights.data(), 3), false).ok());
  for (cpu::SimdLevel level : test::supported_levels()) {
    cpu::set_simd_level(level);
    for (int64_t n_tok : {1, 2, 5, 8, 33}) {
      INFO("level " << cpu::simd_level_name(level) << " tokens " << n_tok);
      const Tensor x = f.make_f32(n_in, n_tok, f.random(n_tok * n_in));
      Graph g;
      std::vector<std::vector<float>> alone;
      for (const Tensor& w : weights) {
        Op op{OpKind::MatMul};
        op.src0 = w;
        op.src1 = x;
        op.dst = f.make(DType::F32, w.rows, n_tok);
        f.run(op);
        alone.push_back(f.read(op.dst));
        op.dst = f.make(DType::F32, w.rows, n_tok);
        g.ops.push_back(op);
      }
      CHECK(cpu::matmul_group_end(g.ops, 0) == 3);
      CHECK(cpu::matmul_group_end(g.ops, 3) == 5);
      REQUIRE(f.be->execute(g).ok());
      for (size_t i = 0; i < weights.size(); ++i) {
        INFO(dtype_name(weights[i].type) << " x " << weights[i].rows);
        const std::vector<float> y = f.read(g.ops[i].dst);
        REQUIRE(std::memcmp(y.data(), alone[i].data(), y.size() * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("A group of MatMuls ends at another input, an output over the input or over another output") {
  Fixture f;
  const int64_t n_in = 64;
  auto matmul = [&](const Tensor& w, const Tensor& x, const Tensor& dst) {
    Op op{OpKind::MatMul};
    op.src0 = w, op.src1 = x, op.dst = dst;
    return op;
  };
  const Tensor w = f.make(DType::Q8_0, n_in, 16), x = f.make(DType::F32, n_in, 1);
  const Tensor other_x = f.make(DType::F32, n_in, 1), y = f.make(DType::F32, 32, 1);
  Tensor y_first = y;  // y's first 16 floats
  y_first.ne0 = 16;
  std::vector<Op> ops = {matmul(w, x, y_first), matmul(w, x, f.make(DType::F32, 16, 1))};
  CHECK(cpu::matmul_group_end(ops, 0) == 2);
  ops.push_back(matmul(w, other_x, f.make(DType::F32, 16, 1)));  // another input
  CHECK(cpu::matmul_group_end(ops, 0) == 2);
  ops[2] = matmul(w, x, x);  // writes over the input the group reads
  CHECK(cpu::matmul_group_end(ops, 0) == 2);
  Tensor y_second = y_first;  // y's last 16 floats
  y_second.offset += 16 * sizeof(float);
  ops[2] = matmul(w, x, y_second);
  CHECK(cpu::matmul_group_end(ops, 0) == 3);  // beside the first op's output, not over it
  ops[0].dst.ne0 = 32;                        // now the first output covers it
  CHECK(cpu::matmul_group_end(ops, 0) == 2);
  ops[2] = matmul(f.make(DType::Q4_K, 256, 16), x, f.make(DType::F32, 16, 1));  // Q8_K activations
  CHECK(cpu::matmul_group_end(ops, 0) == 2);
  Op norm{OpKind::RmsNorm};
  ops[2] = norm;
  CHECK(cpu::matmul_group_end(ops, 0) == 2);
  CHECK(cpu::matmul_group_end(ops, 1) == 2);
}

namespace {

// Naive attention in double over an f32 copy of the cache.
std::vector<double> naive_attention(const std::vector<float>& q, const std::vector<float>& k,
                                    const std::vector<float>& v, const std::vector<int32_t>& pos, int64_t n_kv,
                                    int64_t n_heads, int64_t n_kv_heads, int64_t hd, int64_t window, double scale) {
  const int64_t n_q = static_cast<int64_t>(pos.size());
  std::vector<double> out(n_q * n_heads * hd, 0.0);
  for (int64_t t = 0; t < n_q; ++t)
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t g = h / (n_heads / n_kv_heads);
      std::vector<double> s;
      std::vector<int64_t> js;
      for (int64_t j = 0; j < n_kv; ++j) {
        if (j > pos[t] || (window > 0 && pos[t] - j >= window)) continue;
        double d = 0;
        for (int64_t i = 0; i < hd; ++i) d += double(q[(t * n_heads + h) * hd + i]) * k[(j * n_kv_heads + g) * hd + i];
        s.push_back(d * scale);
        js.push_back(j);
      }
      double mx = -1e300, sum = 0;
      for (double x : s) mx = std::max(mx, x);
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (size_t a = 0; a < s.size(); ++a)
        for (int64_t i = 0; i < hd; ++i)
          out[(t * n_heads + h) * hd + i] += s[a] / sum * v[(js[a] * n_kv_heads + g) * hd + i];
    }
  return out;
}

}  // namespace

// The softmax's exp: each level's within 2 ulp of std::exp (AVX-512 computes its own), 0
// where expf underflows, -inf to 0 and NaN kept; the sum is the double sum of what it wrote.
TEST_CASE("Attention's exp_sum agrees with std::exp at every SIMD level, edge values included") {
  std::mt19937 rng(41);
  std::uniform_real_distribution<float> u(-30.0f, 0.0f);
  std::vector<float> x(77);
  for (float& v : x) v = u(rng);
  const float edge[] = {0.0f,
                        -0.0f,
                        -1e-30f,
                        -0.5f,
                        -0.6931472f,
                        -87.3f,
                        -95.0f,
                        -103.9f,
                        -104.5f,
                        -1e30f,
                        -std::numeric_limits<float>::infinity()};
  std::copy(std::begin(edge), std::end(edge), x.begin());
  for (cpu::SimdLevel level : test::supported_levels()) {
    INFO(cpu::simd_level_name(level));
    for (float max : {0.0f, 2.5f, -1.0f}) {
      x[20] = max < 0.0f ? std::numeric_limits<float>::quiet_NaN() : -1.0f;  // one pass with a NaN
      std::vector<float> s(x.size());
      for (size_t i = 0; i < x.size(); ++i) s[i] = x[i] + max;
      const double sum = cpu::attn_kernels(level).exp_sum(s.data(), static_cast<int64_t>(s.size()), max);
      double want_sum = 0.0;
      for (size_t i = 0; i < s.size(); ++i) {
        const float want = std::exp((x[i] + max) - max);
        INFO("x " << x[i] << " got " << s[i] << " want " << want);
        if (std::isnan(want)) {
          REQUIRE(std::isnan(s[i]));
          continue;
        }
        want_sum += s[i];
        if (want < std::numeric_limits<float>::min()) {
          REQUIRE(std::fabs(s[i] - want) <= 4 * std::numeric_limits<float>::denorm_min());
        } else {
          const int64_t ulps = std::llabs(static_cast<int64_t>(hearth::fp32_to_bits(s[i])) -
                                          static_cast<int64_t>(hearth::fp32_to_bits(want)));
          REQUIRE(ulps <= 2);
        }
      }
      if (max < 0.0f) {
        REQUIRE(std::isnan(sum));
      } else {
        REQUIRE(sum == Approx(want_sum).epsilon(1e-12));
      }
    }
  }
}

// Staging f16 keys as columns in one pass equals converting each row, then transposing,
// bit for bit: every row count of a block, widths with and without a partial 16 columns,
// f16 edge values (subnormals, signed zeros, infinities) included.
TEST_CASE("Attention's f16 key transpose equals convert-then-transpose at every SIMD level") {
  std::mt19937 rng(7);
  const uint16_t edge[] = {0x0000, 0x8000, 0x0001, 0x83ff, 0x7c00, 0xfc00, 0x7bff, 0x3c00};
  for (cpu::SimdLevel level : test::supported_levels()) {
    const cpu::AttnKernels k = cpu::attn_kernels(level);
    if (k.transpose_f16_rows == nullptr) continue;
    INFO(cpu::simd_level_name(level));
    for (int64_t width : {256, 40, 7}) {
      std::vector<uint16_t> h(static_cast<size_t>(16 * width));
      for (size_t i = 0; i < h.size(); ++i) {
        h[i] = static_cast<uint16_t>(rng());
        if ((h[i] & 0x7c00) == 0x7c00) h[i] &= 0xfbff;  // no NaN (its payload is not compared)
      }
      std::copy(std::begin(edge), std::end(edge), h.begin() + 3);
      for (int64_t n_rows = 1; n_rows <= 16; ++n_rows) {
        INFO("width " << width << " rows " << n_rows);
        const int64_t stride = 21;  // columns of kt: wider than a block, as in the op
        std::vector<float> got(static_cast<size_t>(width * stride), -1.0f), want(got);
        std::vector<float> f(static_cast<size_t>(n_rows * width));
        const uint16_t* rows[16];
        for (int64_t i = 0; i < n_rows; ++i) {
          rows[i] = h.data() + (15 - i) * width;  // rows anywhere, in any order
          for (int64_t c = 0; c < width; ++c) f[static_cast<size_t>(i * width + c)] = hearth::fp16_to_fp32(rows[i][c]);
        }
        k.transpose_f16_rows(rows, n_rows, width, got.data() + 2, stride);
        k.transpose_rows(f.data(), n_rows, width, want.data() + 2, stride);
        REQUIRE(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
      }
    }
  }
}

// Scoring keys read in place (a decode step) equals staging them (converted, and transposed
// where the level's qk reads columns) and scoring the staged keys, bit for bit: f16 and Q8_0 rows in any order, 1 to 8
// heads, key counts around the kernels' blocks of 16 and 32, head sizes of 16 to 256 at a
// column offset inside wider rows.
TEST_CASE("Attention's in-place f16 and Q8_0 keys score as staged keys do at every SIMD level") {
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (cpu::SimdLevel level : test::supported_levels()) {
    const cpu::AttnKernels k = cpu::attn_kernels(level);
    if (k.qk_f16_rows == nullptr) continue;
    INFO(cpu::simd_level_name(level));
    for (int64_t n : {256, 64, 16}) {
      const int64_t n_keys = 70, col = n == 16 ? 32 : n, width = (col + n + 63) / 32 * 32;  // rows wider than a head
      std::vector<float> f(static_cast<size_t>(n_keys * width));
      for (float& x : f) x = u(rng);
      std::vector<uint16_t> h(f.size());
      const size_t q8_row = row_bytes(DType::Q8_0, width);
      std::vector<uint8_t> q8(static_cast<size_t>(n_keys) * q8_row);
      std::vector<const uint16_t*> h_rows(static_cast<size_t>(n_keys));
      std::vector<const uint8_t*> q8_rows(static_cast<size_t>(n_keys));
      for (int64_t j = 0; j < n_keys; ++j) {
        cpu::quantize_row(DType::F16, f.data() + j * width, h.data() + j * width, width);
        cpu::quantize_row(DType::Q8_0, f.data() + j * width, q8.data() + j * q8_row, width);
        const int64_t at = (j * 29) % n_keys;  // rows anywhere, in any order
        h_rows[static_cast<size_t>(at)] = h.data() + j * width;
        q8_rows[static_cast<size_t>(at)] = q8.data() + j * q8_row;
      }
      std::vector<float> qv(static_cast<size_t>(cpu::kAttnMaxGroup * n));
      for (float& x : qv) x = u(rng);
      for (int64_t n_j : {1, 15, 16, 17, 33, 70}) {
        // Both kinds of rows staged as the level's qk reads them: element d of key j at
        // kt[d * stride + j] (transposed), or at kt[j * n + d] (stride n).
        const int64_t stride = k.k_transposed ? (n_j + 15) / 16 * 16 : n;
        std::vector<float> kt_h(static_cast<size_t>(n * std::max(stride, n_j))), kt_q(kt_h);
        std::vector<float> row(static_cast<size_t>(width));
        const auto at = [&](int64_t j, int64_t d) {
          return static_cast<size_t>(k.k_transposed ? d * stride + j : j * n + d);
        };
        for (int64_t j = 0; j < n_j; ++j) {
          cpu::dequantize_row(DType::F16, h_rows[static_cast<size_t>(j)], row.data(), width);
          for (int64_t d = 0; d < n; ++d) kt_h[at(j, d)] = row[static_cast<size_t>(col + d)];
          cpu::dequantize_row(DType::Q8_0, q8_rows[static_cast<size_t>(j)], row.data(), width);
          for (int64_t d = 0; d < n; ++d) kt_q[at(j, d)] = row[static_cast<size_t>(col + d)];
        }
        for (int heads = 1; heads <= cpu::kAttnMaxGroup; ++heads) {
          INFO("n " << n << " keys " << n_j << " heads " << heads);
          const float* q[cpu::kAttnMaxGroup];
          std::vector<float> got(static_cast<size_t>(heads * n_j), 5.0f), want(got);
          float* go[cpu::kAttnMaxGroup];
          float* wo[cpu::kAttnMaxGroup];
          for (int hh = 0; hh < heads; ++hh) {
            q[hh] = qv.data() + hh * n;
            go[hh] = got.data() + hh * n_j;
            wo[hh] = want.data() + hh * n_j;
          }
          k.qk_f16_rows(q, heads, h_rows.data(), col, n_j, n, go);
          k.qk(q, heads, kt_h.data(), stride, n_j, n, wo);
          REQUIRE(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
          k.qk_q8_0_rows(q, heads, q8_rows.data(), col, n_j, n, go);
          k.qk(q, heads, kt_q.data(), stride, n_j, n, wo);
          REQUIRE(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
        }
      }
    }
  }
}

// Reading f16 values in place equals converting them, then the f32 weighted sum, bit for
// bit: 1 to 4 heads, head sizes with and without a partial 16, rows in any order.
TEST_CASE("Attention's f16 weighted sum equals convert-then-sum at every SIMD level") {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (cpu::SimdLevel level : test::supported_levels()) {
    const cpu::AttnKernels k = cpu::attn_kernels(level);
    if (k.weighted_sum_f16 == nullptr) continue;
    INFO(cpu::simd_level_name(level));
    for (int64_t n : {256, 72, 5}) {
      const int64_t n_j = 37, width = n + 9, col = 9;  // value rows wider than a head
      std::vector<uint16_t> h(static_cast<size_t>(n_j * width));
      for (uint16_t& x : h) x = hearth::fp32_to_fp16(2.0f * u(rng) - 1.0f);
      std::vector<const uint16_t*> rows(static_cast<size_t>(n_j));
      std::vector<float> f(static_cast<size_t>(n_j * n));
      for (int64_t j = 0; j < n_j; ++j) {
        rows[static_cast<size_t>(j)] = h.data() + ((j * 7) % n_j) * width;
        for (int64_t i = 0; i < n; ++i) f[static_cast<size_t>(j * n + i)] = hearth::fp16_to_fp32(rows[j][col + i]);
      }
      for (int heads = 1; heads <= cpu::kAttnMaxGroup; ++heads) {
        INFO("n " << n << " heads " << heads);
        std::vector<std::vector<float>> wv(static_cast<size_t>(heads), std::vector<float>(static_cast<size_t>(n_j)));
        std::vector<std::vector<float>> got(static_cast<size_t>(heads),
                                            std::vector<float>(static_cast<size_t>(n), 9.0f));
        auto want = got;
        const float* w[cpu::kAttnMaxGroup];
        float* go[cpu::kAttnMaxGroup];
        float* wo[cpu::kAttnMaxGroup];
        for (int hh = 0; hh < heads; ++hh) {
          for (float& x : wv[static_cast<size_t>(hh)]) x = u(rng);
          w[hh] = wv[static_cast<size_t>(hh)].data();
          go[hh] = got[static_cast<size_t>(hh)].data();
          wo[hh] = want[static_cast<size_t>(hh)].data();
        }
        k.weighted_sum_f16(go, w, heads, rows.data(), col, n_j, n, false);
        k.weighted_sum(wo, w, heads, f.data(), n, n_j, n, false);
        for (int hh = 0; hh < heads; ++hh)
          REQUIRE(std::memcmp(got[static_cast<size_t>(hh)].data(), want[static_cast<size_t>(hh)].data(),
                              static_cast<size_t>(n) * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("Attention is causal, honours the sliding window and grouped heads, at every SIMD level") {
  LevelGuard guard;
  Fixture f;
  const int64_t n_heads = 4, n_kv_heads = 2, hd = 40, n_kv = 23;
  for (int64_t window : {int64_t{0}, int64_t{5}}) {
    // Cache in f16, slots permuted (position j lives in slot perm[j]).
    std::vector<int32_t> perm(n_kv);
    for (int64_t j = 0; j < n_kv; ++j) perm[j] = static_cast<int32_t>((j * 7) % n_kv);
    std::vector<float> k = f.random(n_kv * n_kv_heads * hd), v = f.random(n_kv * n_kv_heads * hd);
    for (float& x : k) x = fp16_to_fp32(fp32_to_fp16(x));
    for (float& x : v) x = fp16_to_fp32(fp32_to_fp16(x));
    Tensor kc = f.make(DType::F16, n_kv_heads * hd, n_kv), vc = f.make(DType::F16, n_kv_heads * hd, n_kv);
    std::vector<uint16_t> kh(k.size()), vh(v.size());
    for (int64_t j = 0; j < n_kv; ++j)
      for (int64_t i = 0; i < n_kv_heads * hd; ++i) {
        kh[perm[j] * n_kv_heads * hd + i] = fp32_to_fp16(k[j * n_kv_heads * hd + i]);
        vh[perm[j] * n_kv_heads * hd + i] = fp32_to_fp16(v[j * n_kv_heads * hd + i]);
      }
    REQUIRE(f.be->write(*kc.buffer, 0, kh.data(), kh.size() * 2).ok());
    REQUIRE(f.be->write(*vc.buffer, 0, vh.data(), vh.size() * 2).ok());
    const std::vector<int32_t> pos{0, 3, 9, 21, 22};
    std::vector<float> q = f.random(pos.size() * n_heads * hd);
    const std::vector<double> want = naive_attention(q, k, v, pos, n_kv, n_heads, n_kv_heads, hd, window, 0.2);

    for (cpu::SimdLevel level : test::supported_levels()) {
      cpu::set_simd_level(level);
      auto run = [&](size_t first, size_t n) {
        Op op{OpKind::Attention};
        op.src0 =
            f.make_f32(n_heads * hd, n,
                       std::vector<float>(q.begin() + first * n_heads * hd, q.begin() + (first + n) * n_heads * hd));
        op.src2 = kc;
        op.src3 = vc;
        op.dst = f.make(DType::F32, n_heads * hd, n);
        op.i0 = n_heads;
        op.i1 = n_kv_heads;
        op.i2 = hd;
        op.i3 = static_cast<int32_t>(window);
        op.f0 = 0.2f;
        f.run(op, std::vector<int32_t>(pos.begin() + first, pos.begin() + first + n), perm);
        return f.read(op.dst);
      };
      std::vector<float> all = run(0, pos.size());
      for (size_t i = 0; i < all.size(); ++i) REQUIRE(all[i] == Approx(want[i]).margin(1e-4));
      // A row's result does not depend on the other rows in its batch.
      for (size_t t = 0; t < pos.size(); ++t) {
        std::vector<float> one = run(t, 1);
        for (int64_t i = 0; i < n_heads * hd; ++i) REQUIRE(one[i] == all[t * n_heads * hd + i]);
      }
    }
  }
}

TEST_CASE("StoreKv writes rows into the given slots in f16") {
  Fixture f;
  const int64_t d = 24;
  std::vector<float> k = f.random(2 * d), v = f.random(2 * d);
  Op op{OpKind::StoreKv};
  op.src0 = f.make_f32(d, 2, k);
  op.src1 = f.make_f32(d, 2, v);
  op.src2 = f.make(DType::F16, d, 8);
  op.src3 = f.make(DType::F16, d, 8);
  f.run(op, {5, 2});
  std::vector<uint16_t> kh(8 * d), vh(8 * d);
  REQUIRE(f.be->read(*op.src2.buffer, 0, kh.data(), kh.size() * 2).ok());
  REQUIRE(f.be->read(*op.src3.buffer, 0, vh.data(), vh.size() * 2).ok());
  for (int64_t i = 0; i < d; ++i) {
    REQUIRE(kh[5 * d + i] == fp32_to_fp16(k[i]));
    REQUIRE(vh[2 * d + i] == fp32_to_fp16(v[d + i]));
  }
}

TEST_CASE("GeluMul gives bitwise the same result at every SIMD level") {
  LevelGuard guard;
  Fixture f;
  std::vector<float> a = f.random(3 * 77, 4.0f), b = f.random(3 * 77);
  a[0] = -10.0f;  // the clamps
  a[1] = 10.0f;
  a[2] = -12.5f;
  a[3] = 30.0f;
  std::vector<std::vector<float>> results;
  for (cpu::SimdLevel level : test::supported_levels()) {
    cpu::set_simd_level(level);
    Op op{OpKind::GeluMul};
    op.src0 = f.make_f32(77, 3, a);
    op.src1 = f.make_f32(77, 3, b);
    op.dst = f.make(DType::F32, 77, 3);
    f.run(op);
    results.push_back(f.read(op.dst));
  }
  for (const std::vector<float>& r : results) REQUIRE(r == results[0]);
  REQUIRE(results[0][0] == 0.0f);
  REQUIRE(results[0][3] == 30.0f * b[3]);
}

TEST_CASE("MatMul: a row's result is bitwise the same whatever the batch size") {
  // The scheduler's promise "batched equals alone" rests on this: every kernel path (1-3
  // rows, small tiles, the unpack cache for large batches) reduces a row in one order.
  Fixture f;
  const int64_t n_in = 640, n_out = 70;
  for (DType wt : {DType::F32, DType::F16, DType::Q4_0, DType::Q5_0, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
    std::vector<float> w = f.random(n_out * n_in, 0.5f);
    const int64_t n_in_t = (wt == DType::Q4_K || wt == DType::Q6_K) ? 1024 : n_in;
    if (n_in_t != n_in) w = f.random(n_out * n_in_t, 0.5f);
    Tensor wt_t = f.make(wt, n_in_t, n_out);
    std::vector<uint8_t> q(wt_t.row_stride * n_out);
    for (int64_t r = 0; r < n_out; ++r) cpu::quantize_row(wt, &w[r * n_in_t], q.data() + r * wt_t.row_stride, n_in_t);
    REQUIRE(f.be->write(*wt_t.buffer, 0, q.data(), q.size()).ok());
    const int64_t max_tok = 72;
    std::vector<float> x = f.random(max_tok * n_in_t);
    // Reference: each row alone.
    std::vector<float> alone(max_tok * n_out);
    for (int64_t t = 0; t < max_tok; ++t) {
      Op op{OpKind::MatMul};
      op.src0 = wt_t;
      op.src1 = f.make_f32(n_in_t, 1, std::vector<float>(x.begin() + t * n_in_t, x.begin() + (t + 1) * n_in_t));
      op.dst = f.make(DType::F32, n_out, 1);
      f.run(op);
      std::vector<float> y = f.read(op.dst);
      std::copy(y.begin(), y.end(), alone.begin() + t * n_out);
    }
    for (int64_t n_tok = 2; n_tok <= max_tok; ++n_tok) {
      Op op{OpKind::MatMul};
      op.src0 = wt_t;
      op.src1 = f.make_f32(n_in_t, n_tok, std::vector<float>(x.begin(), x.begin() + n_tok * n_in_t));
      op.dst = f.make(DType::F32, n_out, n_tok);
      f.run(op);
      std::vector<float> y = f.read(op.dst);
      for (int64_t t = 0; t < n_tok; ++t)
        for (int64_t o = 0; o < n_out; ++o) {
          INFO(dtype_name(wt) << " n_tok " << n_tok << " row " << t << " out " << o);
          REQUIRE(y[t * n_out + o] == alone[t * n_out + o]);
        }
    }
  }
}

TEST_CASE("StoreKv quantizes rows to Q8_0 as ggml's reference quantizer, in the given slots") {
  Fixture f;
  const int64_t d = 64;
  std::vector<float> k = f.random(2 * d), v = f.random(2 * d, 3.0f);
  k[7] = 0.0f;
  std::fill(v.begin() + d, v.begin() + d + 32, 0.0f);  // an all-zero block: d = 0, q = 0
  Op op{OpKind::StoreKv};
  op.src0 = f.make_f32(d, 2, k);
  op.src1 = f.make_f32(d, 2, v);
  op.src2 = f.make(DType::Q8_0, d, 4);
  op.src3 = f.make(DType::Q8_0, d, 4);
  f.run(op, {3, 0});
  const size_t rb = row_bytes(DType::Q8_0, d);
  std::vector<uint8_t> kb(4 * rb), vb(4 * rb), want(rb);
  REQUIRE(f.be->read(*op.src2.buffer, 0, kb.data(), kb.size()).ok());
  REQUIRE(f.be->read(*op.src3.buffer, 0, vb.data(), vb.size()).ok());
  cpu::quantize_row(DType::Q8_0, k.data(), want.data(), d);
  CHECK(std::equal(want.begin(), want.end(), kb.begin() + 3 * rb));
  cpu::quantize_row(DType::Q8_0, v.data() + d, want.data(), d);
  CHECK(std::equal(want.begin(), want.end(), vb.begin()));
  // Element by element: within half a step (d / 2) of the value.
  for (int64_t b = 0; b < d / 32; ++b) {
    cpu::BlockQ8_0 blk;
    std::memcpy(&blk, kb.data() + 3 * rb + b * sizeof blk, sizeof blk);
    const float step = fp16_to_fp32(blk.d);
    for (int i = 0; i < 32; ++i) REQUIRE(std::abs(step * blk.qs[i] - k[b * 32 + i]) <= 0.5f * step * 1.001f + 1e-6f);
  }
}

TEST_CASE("Attention over a Q8_0 cache equals attention over its dequantized values in f32, bit for bit") {
  // The CPU dequantizes Q8_0 rows exactly (d * q is exact in f32) before the same loops an
  // F32 cache goes through, so the two outputs are identical at every SIMD level; what q8_0
  // changes is only the values stored, whose drift the model-level test bounds.
  // Heads of 64 start on 16-element boundaries, inside one block; 4 KV heads of 24 (rows of
  // 3 blocks) start off them and cross block boundaries (the element-wise path).
  const auto [hd, n_kv_heads] = GENERATE(std::pair<int64_t, int64_t>{64, 2}, std::pair<int64_t, int64_t>{24, 4});
  LevelGuard guard;
  Fixture f;
  const int64_t n_heads = 2 * n_kv_heads, n_kv = 37, kv_dim = n_kv_heads * hd;
  std::vector<int32_t> perm(n_kv);
  for (int64_t j = 0; j < n_kv; ++j) perm[j] = static_cast<int32_t>((j * 11) % n_kv);
  Tensor kq = f.make(DType::Q8_0, kv_dim, n_kv), vq = f.make(DType::Q8_0, kv_dim, n_kv);
  Tensor kf = f.make(DType::F32, kv_dim, n_kv), vf = f.make(DType::F32, kv_dim, n_kv);
  const size_t rb = row_bytes(DType::Q8_0, kv_dim);
  for (auto [q, fl] : {std::pair{&kq, &kf}, std::pair{&vq, &vf}}) {
    const std::vector<float> x = f.random(n_kv * kv_dim);
    std::vector<uint8_t> bytes(rb);
    std::vector<float> back(kv_dim);
    for (int64_t j = 0; j < n_kv; ++j) {
      cpu::quantize_row(DType::Q8_0, x.data() + j * kv_dim, bytes.data(), kv_dim);
      cpu::dequantize_row(DType::Q8_0, bytes.data(), back.data(), kv_dim);
      REQUIRE(f.be->write(*q->buffer, perm[j] * rb, bytes.data(), rb).ok());
      REQUIRE(f.be->write(*fl->buffer, perm[j] * kv_dim * 4, back.data(), kv_dim * 4).ok());
    }
  }
  const std::vector<int32_t> pos{0, 5, 17, 36};
  const std::vector<float> q = f.random(pos.size() * n_heads * hd);
  for (cpu::SimdLevel level : test::supported_levels()) {
    cpu::set_simd_level(level);
    for (int32_t window : {0, 8}) {
      auto run = [&](const Tensor& k, const Tensor& v) {
        Op op{OpKind::Attention};
        op.src0 = f.make_f32(n_heads * hd, static_cast<int64_t>(pos.size()), q);
        op.src2 = k;
        op.src3 = v;
        op.dst = f.make(DType::F32, n_heads * hd, static_cast<int64_t>(pos.size()));
        op.i0 = n_heads;
        op.i1 = n_kv_heads;
        op.i2 = hd;
        op.i3 = window;
        op.f0 = 0.125f;
        f.run(op, pos, perm);
        return f.read(op.dst);
      };
      CHECK(run(kq, vq) == run(kf, vf));
    }
  }
}
