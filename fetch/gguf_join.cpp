#include "fetch/gguf_join.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "engine/gguf/gguf.h"
#include "fetch/gguf_head.h"

namespace hearth::fetch {

namespace {

uint64_t align_up(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// A file written front to back; errors carry the path.
class Output {
 public:
  explicit Output(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }
  ~Output() {
    if (fd_ >= 0) ::close(fd_);
  }
  Status ok() const { return fd_ >= 0 ? Status{} : error("cannot create"); }
  uint64_t written() const { return written_; }
  Status write(const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return error("cannot write");
      p += w;
      n -= static_cast<size_t>(w);
      written_ += static_cast<uint64_t>(w);
    }
    return Status{};
  }
  Status pad_to(uint64_t offset) {
    static const char kZeros[4096] = {};
    while (written_ < offset)
      if (Status s = write(kZeros, std::min<uint64_t>(sizeof kZeros, offset - written_)); !s) return s;
    return Status{};
  }
  Status sync() const { return ::fsync(fd_) == 0 ? Status{} : error("cannot sync"); }

 private:
  Status error(const char* what) const {
    return make_error(std::string(what) + " " + path_ + ": " + std::strerror(errno));
  }
  std::string path_;
  int fd_ = -1;
  uint64_t written_ = 0;
};

// Checks split.no and split.count where the part carries them.
Status check_part(const gguf::File& f, size_t i, size_t n, const std::string& path) {
  Result<uint64_t> count = f.get_uint_or("split.count", n);
  Result<uint64_t> no = f.get_uint_or("split.no", i);
  if (!count || !no || *count != n || *no != i)
    return make_error(path + " is not part " + std::to_string(i + 1) + " of " + std::to_string(n) +
                      " of this split model (its split.no and split.count say otherwise)");
  return Status{};
}

}  // namespace

Status join_split_gguf(const std::vector<std::string>& parts, const std::string& out_path) {
  std::vector<std::unique_ptr<gguf::File>> files;
  std::vector<GgufLayout> layouts;
  for (size_t i = 0; i < parts.size(); ++i) {
    Result<std::unique_ptr<gguf::File>> f = gguf::File::open(parts[i]);
    if (!f) return make_error(parts[i] + ": " + f.error().message);
    if (Status s = check_part(**f, i, parts.size(), parts[i]); !s) return s;
    Result<GgufLayout> layout = gguf_layout((*f)->base(), (*f)->data_offset());
    if (!layout || layout->tensors.size() != (*f)->tensors().size())
      return make_error(parts[i] + ": " + (layout ? "its tensor infos do not add up" : layout.error().message));
    files.push_back(std::move(*f));
    layouts.push_back(std::move(*layout));
  }
  const gguf::File& first = *files.front();
  const uint64_t alignment = first.alignment();
  std::string header = "GGUF";
  put<uint32_t>(header, layouts.front().version);
  uint64_t n_tensors = 0;
  for (const auto& f : files) n_tensors += f->tensors().size();
  std::string kvs;
  uint64_t n_kv = 0;
  for (const GgufLayout::Range& r : layouts.front().kvs) {
    if (r.key.rfind("split.", 0) == 0) continue;
    kvs.append(reinterpret_cast<const char*>(first.base()) + r.begin, r.end - r.begin);
    ++n_kv;
  }
  put<uint64_t>(header, n_tensors);
  put<uint64_t>(header, n_kv);
  header += kvs;
  // Tensor infos as the parts have them, but for the offset (their last 8 bytes).
  uint64_t offset = 0;
  for (size_t p = 0; p < files.size(); ++p) {
    for (size_t t = 0; t < files[p]->tensors().size(); ++t) {
      const GgufLayout::Range& r = layouts[p].tensors[t];
      offset = align_up(offset, alignment);
      header.append(reinterpret_cast<const char*>(files[p]->base()) + r.begin, r.end - r.begin - 8);
      put<uint64_t>(header, offset);
      offset += files[p]->tensors()[t].n_bytes;
    }
  }
  Output out(out_path);
  if (Status s = out.ok(); !s) return s;
  if (Status s = out.write(header.data(), header.size()); !s) return s;
  const uint64_t data_start = align_up(out.written(), alignment);
  offset = 0;
  for (const auto& f : files) {
    for (const gguf::TensorInfo& t : f->tensors()) {
      offset = align_up(offset, alignment);
      if (Status s = out.pad_to(data_start + offset); !s) return s;
      if (Status s = out.write(t.data, t.n_bytes); !s) return s;
      offset += t.n_bytes;
    }
  }
  if (Status s = out.sync(); !s) return s;
  Result<std::unique_ptr<gguf::File>> joined = gguf::File::open(out_path);
  if (!joined) return make_error("the joined file " + out_path + " does not read back: " + joined.error().message);
  if ((*joined)->tensors().size() != n_tensors) return make_error("the joined file " + out_path + " lost tensors");
  return Status{};
}

}  // namespace hearth::fetch
