// Runs the same operations on the CPU backend (the reference) and on a device backend
// (Vulkan or CUDA: the test binary links one, device_vulkan.cpp or device_cuda.cpp), with
// the same inputs, so tests compare the two outputs element by element. The op tests are
// written once and built once per device backend; DEVICE names the device in test names.
//
// Every tensor a test makes exists twice, once per backend; the test writes and builds ops
// with the CPU's tensors and DevicePair translates each op's buffers to the device twins.
// finish() destroys the device backend and checks that it reported no errors of its own
// (Vulkan: the validation layer's messages).
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/device_under_test.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/quant_ref.h"

#ifndef DEVICE
#error "define DEVICE (the device's name in test names) and DEVICE_TAG"
#endif

namespace hearth::test {

class DevicePair {
 public:
  DevicePair() {
    cpu_ = cpu::make_cpu_backend({2});
    Result<std::unique_ptr<Backend>> vk = make_device_under_test();
    if (vk) {
      vk_ = std::move(*vk);
    } else {
      why_not_ = vk.error().message;
    }
  }
  ~DevicePair() {
    vk_twin_.clear();
    vk_buffers_.clear();
    if (vk_) destroy_device_under_test(vk_);
  }

  bool ok() const { return vk_ != nullptr; }
  const std::string& why_not() const { return why_not_; }
  Backend& cpu() { return *cpu_; }
  Backend& dev() { return *vk_; }

  std::vector<float> random(size_t n, float scale = 1.0f) {
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng_);
    return v;
  }
  std::mt19937& rng() { return rng_; }

  // A buffer of `bytes` on both backends, both filled with `fill` (bytes) so reads of
  // padding or of rows an op must not touch are caught.
  Buffer* alloc(size_t bytes, BufferKind kind = BufferKind::Activations, uint8_t fill = 0x7f) {
    auto c = cpu_->alloc(bytes, kind);
    auto v = vk_->alloc(bytes, kind);
    REQUIRE(c.ok());
    REQUIRE(v.ok());
    Buffer* key = c->get();
    vk_twin_[key] = v->get();
    std::vector<uint8_t> pattern(bytes, fill);
    REQUIRE(cpu_->write(**c, 0, pattern.data(), bytes).ok());
    REQUIRE(vk_->write(**v, 0, pattern.data(), bytes).ok());
    cpu_buffers_.push_back(std::move(*c));
    vk_buffers_.push_back(std::move(*v));
    return key;
  }

  // rows x ne0 of `type`, rows `row_stride` bytes apart (0: packed), starting `offset`
  // bytes into a buffer of its own.
  Tensor tensor(DType type, int64_t ne0, int64_t rows, BufferKind kind = BufferKind::Activations, size_t row_stride = 0,
                size_t offset = 0, uint8_t fill = 0x7f) {
    Tensor t;
    t.type = type;
    t.ne0 = ne0;
    t.rows = rows;
    t.row_stride = row_stride ? row_stride : row_bytes(type, ne0);
    t.offset = offset;
    t.buffer = alloc(offset + t.row_stride * static_cast<size_t>(rows), kind, fill);
    return t;
  }

  // An F32 tensor holding `v` (row-major, ne0 per row), optionally strided and offset.
  Tensor f32(int64_t ne0, int64_t rows, const std::vector<float>& v, size_t row_stride = 0, size_t offset = 0) {
    Tensor t = tensor(DType::F32, ne0, rows, BufferKind::Activations, row_stride, offset);
    for (int64_t r = 0; r < rows; ++r) write_row(t, r, &v[static_cast<size_t>(r * ne0)]);
    return t;
  }

  // Weights of `type` made from f32 values by the project's reference quantizer, uploaded
  // at `offset` bytes into the weight buffer (as a GGUF tensor sits inside the file).
  // `dequantized` receives the values the weights really hold.
  Tensor weights(DType type, int64_t ne0, int64_t rows, const std::vector<float>& w, std::vector<float>* dequantized,
                 size_t offset = 96) {
    const size_t rb = row_bytes(type, ne0);
    host_.emplace_back(offset + rb * static_cast<size_t>(rows), uint8_t{0});
    std::vector<uint8_t>& host = host_.back();
    if (dequantized) dequantized->resize(static_cast<size_t>(ne0 * rows));
    for (int64_t r = 0; r < rows; ++r) {
      uint8_t* row = host.data() + offset + rb * static_cast<size_t>(r);
      cpu::quantize_row(type, &w[static_cast<size_t>(r * ne0)], row, ne0);
      if (dequantized) cpu::dequantize_row(type, row, dequantized->data() + r * ne0, ne0);
    }
    auto c = cpu_->upload_weights(host.data(), host.size());
    auto v = vk_->upload_weights(host.data(), host.size());
    REQUIRE(c.ok());
    INFO((v.ok() ? std::string() : v.error().message));
    REQUIRE(v.ok());
    Tensor t;
    t.buffer = c->get();
    t.offset = offset;
    t.type = type;
    t.ne0 = ne0;
    t.rows = rows;
    t.row_stride = rb;
    vk_twin_[t.buffer] = v->get();
    cpu_buffers_.push_back(std::move(*c));
    vk_buffers_.push_back(std::move(*v));
    return t;
  }

  // Writes one row (row_size() bytes) of t on both backends.
  void write_row(const Tensor& t, int64_t r, const void* data) {
    const size_t at = t.offset + static_cast<size_t>(r) * t.row_stride;
    REQUIRE(cpu_->write(*t.buffer, at, data, t.row_size()).ok());
    REQUIRE(vk_->write(*twin(t.buffer), at, data, t.row_size()).ok());
  }

  // The rows of t (F32) as read back from one backend, packed.
  std::vector<float> read_cpu(const Tensor& t) { return read(*cpu_, *t.buffer, t); }
  std::vector<float> read_dev(const Tensor& t) { return read(*vk_, *twin(t.buffer), t); }
  // Raw bytes of a whole buffer.
  std::vector<uint8_t> bytes_cpu(const Tensor& t) { return bytes(*cpu_, *t.buffer); }
  std::vector<uint8_t> bytes_dev(const Tensor& t) { return bytes(*vk_, *twin(t.buffer)); }

  // Executes the graph (built with CPU tensors) on both backends; their results.
  std::pair<Status, Status> try_run(const Graph& g) {
    Status c = cpu_->execute(g);
    Graph vg = g;
    for (Op& op : vg.ops)
      for (Tensor* t : {&op.dst, &op.src0, &op.src1, &op.src2, &op.src3})
        if (t->valid()) t->buffer = twin(t->buffer);
    return {c, vk_->execute(vg)};
  }

  // Executes the graph (built with CPU tensors) on both backends.
  void run(const Graph& g) {
    Status c = cpu_->execute(g);
    INFO((c.ok() ? std::string() : c.error().message));
    REQUIRE(c.ok());
    Graph vg = g;
    for (Op& op : vg.ops)
      for (Tensor* t : {&op.dst, &op.src0, &op.src1, &op.src2, &op.src3})
        if (t->valid()) t->buffer = twin(t->buffer);
    Status v = vk_->execute(vg);
    INFO((v.ok() ? std::string() : v.error().message));
    REQUIRE(v.ok());
  }
  void run(Op op, const std::vector<int32_t>& ia = {}, const std::vector<int32_t>& ib = {}) {
    Graph g;
    op.ia = g.add_ints(ia);
    op.ib = g.add_ints(ib);
    g.ops.push_back(op);
    run(g);
  }

  // Executes the graph (built with CPU tensors) on the device only: for ops the test
  // checks against references of its own rather than the CPU backend.
  Status try_run_dev(const Graph& g) {
    Graph vg = g;
    for (Op& op : vg.ops)
      for (Tensor* t : {&op.dst, &op.src0, &op.src1, &op.src2, &op.src3})
        if (t->valid()) t->buffer = twin(t->buffer);
    return vk_->execute(vg);
  }
  void run_dev(const Op& op) {
    Graph g;
    g.ops.push_back(op);
    Status v = try_run_dev(g);
    INFO((v.ok() ? std::string() : v.error().message));
    REQUIRE(v.ok());
  }
  // The rows of an I32 tensor as read back from the device, packed.
  std::vector<int32_t> read_dev_i32(const Tensor& t) {
    std::vector<int32_t> v(static_cast<size_t>(t.ne0 * t.rows));
    for (int64_t r = 0; r < t.rows; ++r)
      REQUIRE(vk_->read(*twin(t.buffer), t.offset + static_cast<size_t>(r) * t.row_stride,
                        &v[static_cast<size_t>(r * t.ne0)], t.row_size())
                  .ok());
    return v;
  }

  // Destroys the device side (buffers, then the device) and checks it reported no errors
  // during the test. Call last.
  void finish() {
    vk_twin_.clear();
    vk_buffers_.clear();
    if (vk_) destroy_device_under_test(vk_);
    CHECK(device_error_count() == 0);
  }

 private:
  Buffer* twin(Buffer* b) {
    auto it = vk_twin_.find(b);
    REQUIRE(it != vk_twin_.end());
    return it->second;
  }
  static std::vector<float> read(Backend& be, const Buffer& b, const Tensor& t) {
    std::vector<float> v(static_cast<size_t>(t.ne0 * t.rows));
    for (int64_t r = 0; r < t.rows; ++r)
      REQUIRE(
          be.read(b, t.offset + static_cast<size_t>(r) * t.row_stride, &v[static_cast<size_t>(r * t.ne0)], t.row_size())
              .ok());
    return v;
  }
  static std::vector<uint8_t> bytes(Backend& be, const Buffer& b) {
    std::vector<uint8_t> v(b.bytes());
    REQUIRE(be.read(b, 0, v.data(), v.size()).ok());
    return v;
  }

  std::unique_ptr<Backend> cpu_, vk_;
  std::string why_not_;
  std::mt19937 rng_{20261202};
  std::deque<std::vector<uint8_t>> host_;  // weight bytes the CPU backend maps in place
  std::vector<std::unique_ptr<Buffer>> cpu_buffers_, vk_buffers_;
  std::map<const Buffer*, Buffer*> vk_twin_;
};

// Compares the device result with the CPU's element by element: passes when every
// |vk - cpu| <= tol(i); otherwise reports the worst element. HEARTH_DEVICE_REPORT=1 prints
// the worst ratio of every comparison (how much room each tolerance leaves).
template <class Tol>
void expect_close(const std::vector<float>& cpu, const std::vector<float>& vk, Tol tol, const std::string& what) {
  REQUIRE(cpu.size() == vk.size());
  double worst = 0;
  size_t at = 0;
  size_t bad = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const double err = std::fabs(double(vk[i]) - cpu[i]);
    const double ratio = std::isnan(vk[i]) != std::isnan(cpu[i]) ? 1e30 : err / tol(i);
    if (ratio > 1) ++bad;
    if (ratio > worst || std::isnan(ratio)) {
      worst = std::isnan(ratio) ? 1e30 : ratio;
      at = i;
    }
  }
  if (const char* e = std::getenv("HEARTH_DEVICE_REPORT"); e && *e == '1')
    std::printf("%-50s worst |vk - cpu| / tolerance %.3g\n", what.c_str(), worst);
  INFO(what << ": " << bad << " of " << cpu.size() << " elements out of tolerance; worst at " << at << ": cpu "
            << cpu[at] << ", " DEVICE " " << vk[at] << ", tolerance " << tol(at));
  CHECK(bad == 0);
}

}  // namespace hearth::test

// Declares `f`, a DevicePair; when no device can run hearth, warns and skips the test.
#define NEED_DEVICE(f)                                                         \
  hearth::test::DevicePair f;                                                  \
  if (!f.ok()) {                                                               \
    WARN("no usable " DEVICE " device (" << f.why_not() << "); test skipped"); \
    return;                                                                    \
  }
