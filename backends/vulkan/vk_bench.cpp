// A manual benchmark (not a CI test): MatMul timings on the Vulkan backend.
//   hearth_vk_bench [n_tok]     hearth_vk_bench list   (devices, error paths)
//   hearth_vk_bench experts [n_tok]   (MatMulExperts: 32 Q4_K experts of 768 x 2048, k = 8)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/vulkan/vulkan_backend.h"

using namespace hearth;
static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// MatMulExperts of n_tok tokens, each routed to k = 8 of 32 experts (ids spread evenly), as
// a Qwen3-30B-A3B gate projection (768 x 2048 per expert), Q4_K.
static int bench_experts(Backend& be, int n_tok) {
  const int64_t n_expert = 32, n_out = 768, n_in = 2048, k = 8;
  const DType t = DType::Q4_K;
  const size_t wb = row_bytes(t, n_in) * n_out * n_expert;
  std::vector<uint8_t> host(wb, 0x11);
  auto w = be.upload_weights(host.data(), wb);
  auto x = be.alloc(n_in * 4 * n_tok, BufferKind::Activations);
  auto ids = be.alloc(k * 4 * n_tok, BufferKind::Activations);
  auto y = be.alloc(n_out * 4 * n_tok * k, BufferKind::Activations);
  if (!w || !x || !ids || !y) {
    printf("out of memory\n");
    return 1;
  }
  std::vector<float> xs(n_in * n_tok, 0.5f);
  std::vector<int32_t> is(k * n_tok);
  for (size_t i = 0; i < is.size(); ++i) is[i] = static_cast<int32_t>((i * 7 + i / k) % n_expert);
  if (!be.write(**x, 0, xs.data(), xs.size() * 4) || !be.write(**ids, 0, is.data(), is.size() * 4)) return 1;
  Graph g;
  Op op(OpKind::MatMulExperts);
  op.src0 = Tensor{w->get(), 0, t, n_in, n_out * n_expert, row_bytes(t, n_in)};
  op.src1 = Tensor{x->get(), 0, DType::F32, n_in, n_tok, size_t(n_in * 4)};
  op.src2 = Tensor{ids->get(), 0, DType::I32, k, n_tok, size_t(k * 4)};
  op.dst = Tensor{y->get(), 0, DType::F32, n_out, n_tok * k, size_t(n_out * 4)};
  g.ops.push_back(op);
  if (Status st = be.execute(g); !st) {
    printf("%s\n", st.error().message.c_str());
    return 1;
  }
  const int reps = 3;
  const double t0 = now();
  for (int i = 0; i < reps; ++i) (void)be.execute(g);
  const double dt = (now() - t0) / reps;
  printf("matmul_experts Q4_K 32 x %lld x %lld, k %lld, %d tok: %8.2f ms\n", (long long)n_out, (long long)n_in,
         (long long)k, n_tok, dt * 1e3);
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "list") {
    auto l = vulkan::list_devices();
    if (!l) {
      printf("%s\n", l.error().message.c_str());
      return 1;
    }
    for (auto& d : *l)
      printf("%d %s type=%s api=%s driver=%s local=%llu fp16=%d f16arith=%d sg=%u usable=%d %s\n", d.index,
             d.name.c_str(), d.type.c_str(), d.api_version.c_str(), d.driver.c_str(),
             (unsigned long long)d.device_local_bytes, d.fp16_storage, d.fp16_arithmetic, d.subgroup_size, d.usable,
             d.why_not.c_str());
    vulkan::VulkanOptions o;
    o.device = 7;
    auto b = vulkan::make_vulkan_backend(o);
    printf("device 7: %s\n", b ? "ok?" : b.error().message.c_str());
    o.device = 0;
    auto b0 = vulkan::make_vulkan_backend(o);
    if (b0)
      printf("device 0: %s kind=%s mem=%zu\n", (*b0)->info().name.c_str(), (*b0)->info().kind.c_str(),
             (*b0)->info().memory_bytes);
    auto big = (*b0)->alloc(size_t(1) << 40, BufferKind::Activations);
    printf("1 TiB alloc: %s\n", big ? "ok?" : big.error().message.c_str());
    return 0;
  }
  auto vk = vulkan::make_vulkan_backend({});
  if (!vk) {
    printf("%s\n", vk.error().message.c_str());
    return 1;
  }
  Backend& be = **vk;
  if (argc > 1 && std::string(argv[1]) == "experts") return bench_experts(be, argc > 2 ? atoi(argv[2]) : 1);
  const DType types[] = {DType::Q8_0, DType::Q4_K, DType::Q6_K, DType::Q5_0};
  const int64_t shapes[][2] = {{262144, 640}, {65536, 640}, {16384, 640}, {2048, 640}};
  const int n_tok = argc > 1 ? atoi(argv[1]) : 1;
  for (int s = 0; s < 4; ++s) {
    for (DType t : types) {
      const int64_t n_out = shapes[s][0], n_in = shapes[s][1];
      if (t != DType::Q8_0) continue;
      const size_t wb = row_bytes(t, n_in) * n_out;
      std::vector<uint8_t> host(wb, 0x11);
      auto w = be.upload_weights(host.data(), wb);
      auto x = be.alloc(n_in * 4 * n_tok, BufferKind::Activations);
      auto y = be.alloc(n_out * 4 * n_tok, BufferKind::Activations);
      std::vector<float> xs(n_in * n_tok, 0.5f);
      if (Status st = be.write(**x, 0, xs.data(), xs.size() * 4); !st) {
        printf("%s\n", st.error().message.c_str());
        return 1;
      }
      Graph g;
      Op op(OpKind::MatMul);
      op.src0 = Tensor{w->get(), 0, t, n_in, n_out, row_bytes(t, n_in)};
      op.src1 = Tensor{x->get(), 0, DType::F32, n_in, n_tok, size_t(n_in * 4)};
      op.dst = Tensor{y->get(), 0, DType::F32, n_out, n_tok, size_t(n_out * 4)};
      g.ops.push_back(op);
      Status st = be.execute(g);
      if (!st) {
        printf("%s\n", st.error().message.c_str());
        return 1;
      }
      const int reps = 3;
      double t0 = now();
      for (int i = 0; i < reps; ++i) (void)be.execute(g);
      const double dt = (now() - t0) / reps;
      printf("matmul %-5s %6lld x %5lld, %d tok: %8.2f ms  (%.2f GB/s weights)\n", dtype_name(t), (long long)n_out,
             (long long)n_in, n_tok, dt * 1e3, wb / dt / 1e9);
    }
  }
  return 0;
}
