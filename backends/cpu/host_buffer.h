// The CPU backend's buffers: plain host memory, either its own (alloc) or the caller's
// (upload_weights: the GGUF mapping itself). A weights buffer also owns the repacked copies
// of the weights that MatMul reads (repack.h), keyed by the offset of their view, so
// they live and die with the buffer they stand for. Internal to backends/cpu.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/repack.h"

namespace hearth::cpu {

class HostBuffer final : public Buffer {
 public:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  using Bytes = std::unique_ptr<uint8_t, Free>;  // from std::aligned_alloc

  HostBuffer(void* data, size_t bytes, bool owned) : data_(data), bytes_(bytes), owned_(owned) {}
  ~HostBuffer() override {
    if (owned_) std::free(data_);
  }
  size_t bytes() const override { return bytes_; }
  void* host_data() override { return data_; }
  const void* host_data() const override { return data_; }

  // The repacked rows of weight view w (a whole prepared tensor, or its first rows in
  // whole 16-row groups), or null when w was not repacked.
  const uint8_t* repacked(const Tensor& w) const {
    if (repacked_.empty()) return nullptr;
    const auto it = repacked_.find(w.offset);
    if (it == repacked_.end()) return nullptr;
    const Repacked& r = it->second;
    const bool same = r.type == w.type && r.ne0 == w.ne0 && w.rows <= r.rows && w.rows % kRepackRows == 0;
    return same ? r.data : nullptr;
  }
  // The repacked rows of the view w, at data inside an arena the buffer owns (adopt).
  void add_repacked(const Tensor& w, const uint8_t* data) {
    repacked_[w.offset] = Repacked{w.type, w.ne0, w.rows, data};
  }
  // Memory the repacked rows live in, freed with the buffer.
  void adopt(Bytes arena) { arenas_.push_back(std::move(arena)); }

 private:
  struct Repacked {
    DType type;
    int64_t ne0, rows;
    const uint8_t* data;
  };
  void* data_;
  size_t bytes_;
  bool owned_;
  std::unordered_map<size_t, Repacked> repacked_;
  std::vector<Bytes> arenas_;
};

}  // namespace hearth::cpu
