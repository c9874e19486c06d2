// backends/op_profile.h: a decode step timed op by op gives the same logits as an untimed
// one, counts every op of every step, and counts the bytes the ops must move (the whole
// of each weight matrix, the KV rows attention sees, a sliding window's last rows only).
#include "backends/op_profile.h"

#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "engine/gguf/gguf.h"
#include "engine/model/context.h"
#include "engine/model/model.h"
#include "engine/model/token_work.h"
#include "tests/tools/synthetic_model.h"

using namespace hearth;

namespace {

// A buffer that only exists so that a hand-made Tensor is valid().
class NoBuffer : public Buffer {
 public:
  size_t bytes() const override { return 1 << 20; }
};

Tensor rows_of(Buffer* b, DType t, int64_t rows, int64_t ne0) {
  Tensor x;
  x.buffer = b;
  x.type = t;
  x.rows = rows;
  x.ne0 = ne0;
  x.row_stride = row_bytes(t, ne0);
  return x;
}

}  // namespace

TEST_CASE("op_bytes: a MatMul moves its whole weight matrix, attention only the KV rows its queries see") {
  NoBuffer buf;
  Graph g;
  Op mm(OpKind::MatMul);
  mm.src0 = rows_of(&buf, DType::Q8_0, 10, 64);  // 10 rows x 2 blocks x 34 bytes
  mm.src1 = rows_of(&buf, DType::F32, 1, 64);
  mm.dst = rows_of(&buf, DType::F32, 1, 10);
  CHECK(op_bytes(mm, g) == 10 * 68 + 64 * 4 + 10 * 4);
  CHECK(op_group(mm) == "MatMul Q8_0 10x64");

  Op att(OpKind::Attention);  // one query at position 10 over 11 positions, K/V rows of 128 B
  att.src2 = rows_of(&buf, DType::F16, 32, 64);
  att.src3 = rows_of(&buf, DType::F16, 32, 64);
  const int32_t pos[] = {10};
  std::vector<int32_t> slots(11);
  att.ia = g.add_ints(pos);
  att.ib = g.add_ints(slots);
  CHECK(op_bytes(att, g) == 11 * 256);  // global: every position (src0, dst not set here)
  att.i3 = 4;
  CHECK(op_bytes(att, g) == 4 * 256);  // a sliding window of 4: positions 7..10
  CHECK(op_group(att) == "Attention");
}

TEST_CASE("a decode step timed op by op gives the same logits and counts every op and weight byte") {
  test::SyntheticOptions o;
  o.arch = "gemma3";  // sliding-window layers and a tied output
  o.type = DType::Q8_0;
  auto bytes = test::make_synthetic_model(o);
  REQUIRE(bytes.ok());
  auto f = gguf::File::from_memory(bytes->data(), bytes->size());
  REQUIRE(f.ok());
  std::shared_ptr<const gguf::File> file(std::move(*f));
  std::unique_ptr<Backend> cpu = cpu::make_cpu_backend({2});
  auto model = Model::load(file, *cpu);
  REQUIRE(model.ok());
  ProfilingBackend prof(*cpu);
  auto plain = InferenceContext::create(**model, *cpu, {});
  auto timed = InferenceContext::create(**model, prof, {});
  REQUIRE(plain.ok());
  REQUIRE(timed.ok());
  const std::vector<int32_t> prompt = {2, 70, 81, 90, 100, 120};
  REQUIRE((*plain)->eval(prompt).ok());
  REQUIRE((*timed)->eval(prompt).ok());
  prof.set_recording(true);
  for (int32_t t : {130, 140, 150}) {
    REQUIRE((*plain)->eval(std::span<const int32_t>(&t, 1)).ok());
    REQUIRE((*timed)->eval(std::span<const int32_t>(&t, 1)).ok());
    CHECK((*plain)->logits() == (*timed)->logits());  // bitwise: the same ops in the same order
  }
  CHECK(prof.graphs() == 3);
  double matmul_bytes = 0;
  int64_t attention_ops = 0;
  for (const OpProfileRow& r : prof.rows()) {
    INFO(r.group);
    CHECK(r.ops % 3 == 0);  // the same ops every step
    CHECK(r.seconds >= 0);
    CHECK(r.bytes > 0);
    if (r.group.rfind("MatMul", 0) == 0) matmul_bytes += r.bytes / 3;
    if (r.group == "Attention") attention_ops = r.ops;
  }
  CHECK(attention_ops == 3 * (*model)->config().n_layer);
  // Every matrix of the layers and the output projection, read once a step, plus activations.
  const double weights = token_work(*file).decode_bytes;
  CHECK(matmul_bytes >= weights);
  CHECK(matmul_bytes < weights * 1.2);
}
