// Parsing and validation of a GGUF file. Every read goes through Parser::need(), which checks
// it against the bytes that remain; counts are bounded by what the remaining bytes could hold
// before anything is allocated from them.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>

#include "engine/gguf/gguf.h"
#include "engine/gguf/internal.h"

static_assert(std::endian::native == std::endian::little, "GGUF readers assume a little-endian host");

#define HEARTH_TRY(expr)                               \
  do {                                                 \
    if (auto s_ = (expr); !s_.ok()) return s_.error(); \
  } while (0)

namespace hearth::gguf {
namespace {

// Smallest encodings, used to bound counts: a key/value is a key length (8), a value type (4)
// and at least one payload byte; a tensor info is a name length (8), n_dims (4), one dim (8),
// a type (4) and an offset (8).
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;
constexpr uint64_t kArrayHeaderBytes = 4 + 8;
// Nested arrays deeper than this are rejected; real files use none, and it keeps recursion short.
constexpr int kMaxArrayDepth = 8;
constexpr uint64_t kDefaultAlignment = 32;

std::string quoted(std::string_view s) {
  std::string out = "'";
  for (char c : s.substr(0, 200)) {
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    }
  }
  if (s.size() > 200) out += "...";
  return out + "'";
}

}  // namespace

class Parser {
 public:
  explicit Parser(File& f) : f_(f), p_(f.base_), size_(f.size_) {}

  Status run() {
    HEARTH_TRY(header());
    HEARTH_TRY(metadata());
    HEARTH_TRY(alignment());
    HEARTH_TRY(tensor_infos());
    return tensor_data();
  }

 private:
  Error fail(uint64_t at, const std::string& msg) const {
    return make_error("gguf: " + msg + " (at byte " + std::to_string(at) + ")");
  }
  uint64_t remaining() const { return size_ - pos_; }

  Status need(uint64_t n, std::string_view what) const {
    if (n > remaining())
      return fail(pos_, std::string(what) + " needs " + std::to_string(n) + " bytes but only " +
                            std::to_string(remaining()) + " remain (file truncated?)");
    return {};
  }

  template <class T>
  Status read(T& out, std::string_view what) {
    HEARTH_TRY(need(sizeof(T), what));
    std::memcpy(&out, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return {};
  }

  Status read_string(std::string_view& out, const std::string& what) {
    uint64_t len_pos = pos_;
    uint64_t len = 0;
    // The messages are built only on failure: a vocabulary is 100,000s of strings.
    if (sizeof(len) > remaining()) return need(sizeof(len), what + ": string length");
    std::memcpy(&len, p_ + pos_, sizeof(len));
    pos_ += sizeof(len);
    if (len > remaining())
      return fail(len_pos, what + ": string length " + std::to_string(len) + " exceeds the " +
                               std::to_string(remaining()) + " bytes left in the file");
    out = std::string_view(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return {};
  }

  Status read_type(ValueType& out, const std::string& what) {
    uint64_t at = pos_;
    uint32_t t = 0;
    HEARTH_TRY(read(t, what + ": value type"));
    if (t > static_cast<uint32_t>(ValueType::F64)) return fail(at, what + ": unknown value type " + std::to_string(t));
    out = static_cast<ValueType>(t);
    return {};
  }

  Status header() {
    if (size_ < 4) return fail(0, "file of " + std::to_string(size_) + " bytes is too small for a GGUF header");
    if (std::memcmp(p_, "GGUF", 4) != 0)
      return fail(0, "bad magic " + quoted(std::string_view(reinterpret_cast<const char*>(p_), 4)) +
                         ", expected 'GGUF' (not a GGUF file)");
    pos_ = 4;
    HEARTH_TRY(read(f_.version_, "version"));
    if (f_.version_ != 2 && f_.version_ != 3) {
      std::string msg = "unsupported GGUF version " + std::to_string(f_.version_) + " (hearth reads versions 2 and 3";
      if (f_.version_ == 1) msg += "; version 1 files use 32-bit counts, convert them with llama.cpp";
      if (f_.version_ >= 0x01000000) msg += "; this may be a big-endian file";
      return fail(4, msg + ")");
    }
    HEARTH_TRY(read(n_tensors_, "tensor count"));
    HEARTH_TRY(read(n_kv_, "metadata count"));
    if (n_tensors_ > remaining() / kMinTensorInfoBytes)
      return fail(8, "tensor count " + std::to_string(n_tensors_) + " cannot fit in the " +
                         std::to_string(remaining()) + " bytes left in the file");
    if (n_kv_ > (remaining() - n_tensors_ * kMinTensorInfoBytes) / kMinKvBytes)
      return fail(16, "metadata count " + std::to_string(n_kv_) + " cannot fit in the " + std::to_string(remaining()) +
                          " bytes left in the file");
    return {};
  }

  // Checks a value of type t at pos_ and moves past it. For arrays, *elem and *count (if
  // given) receive the element type and count, and pos_ is past the whole array.
  Status skip_value(ValueType t, int depth, const std::string& what, File::Value* v) {
    if (t == ValueType::STRING) {
      std::string_view s;
      return read_string(s, what);
    }
    if (t != ValueType::ARRAY) {
      uint64_t n = value_size(t);
      if (n > remaining()) return need(n, what + ": " + value_type_name(t) + " value");
      pos_ += n;
      return {};
    }
    if (depth >= kMaxArrayDepth)
      return fail(pos_, what + ": arrays nested deeper than " + std::to_string(kMaxArrayDepth));
    ValueType elem{};
    HEARTH_TRY(read_type(elem, what + " array element"));
    uint64_t count_pos = pos_;
    uint64_t count = 0;
    HEARTH_TRY(read(count, what + ": array length"));
    if (v) {
      v->elem_type = elem;
      v->count = count;
      v->pos = pos_;
    }
    uint64_t min_elem = elem == ValueType::STRING ? 8 : elem == ValueType::ARRAY ? kArrayHeaderBytes : value_size(elem);
    if (count > remaining() / min_elem)
      return fail(count_pos, what + ": array of " + std::to_string(count) + " " + value_type_name(elem) +
                                 " elements cannot fit in the " + std::to_string(remaining()) +
                                 " bytes left in the file");
    if (elem != ValueType::STRING && elem != ValueType::ARRAY) {
      pos_ += count * min_elem;
      return {};
    }
    for (uint64_t i = 0; i < count; ++i) HEARTH_TRY(skip_value(elem, depth + 1, what, nullptr));
    return {};
  }

  Status metadata() {
    f_.values_.reserve(std::min<uint64_t>(n_kv_, 4096));
    for (uint64_t i = 0; i < n_kv_; ++i) {
      File::Value v{};
      v.key_pos = pos_;
      HEARTH_TRY(read_string(v.key, "metadata key " + std::to_string(i)));
      std::string what = "key " + quoted(v.key);
      HEARTH_TRY(read_type(v.type, what));
      v.pos = pos_;
      HEARTH_TRY(skip_value(v.type, 0, what, &v));
      f_.values_.push_back(v);
    }
    auto& idx = f_.sorted_values_;
    idx.resize(f_.values_.size());
    for (uint32_t i = 0; i < idx.size(); ++i) idx[i] = i;
    auto key = [&](uint32_t i) { return f_.values_[i].key; };
    std::stable_sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) { return key(a) < key(b); });
    for (size_t i = 1; i < idx.size(); ++i)
      if (key(idx[i - 1]) == key(idx[i]))
        return fail(f_.values_[idx[i]].key_pos, "duplicate metadata key " + quoted(key(idx[i])));
    return {};
  }

  Status alignment() {
    f_.alignment_ = kDefaultAlignment;
    const File::Value* v = f_.find("general.alignment");
    if (!v) return {};
    auto a = f_.get_uint("general.alignment");
    if (!a.ok()) return a.error();
    if (*a == 0 || !std::has_single_bit(*a))
      return fail(v->pos, "general.alignment " + std::to_string(*a) + " is not a power of two");
    f_.alignment_ = *a;
    return {};
  }

  Status tensor_infos() {
    f_.tensors_.reserve(std::min<uint64_t>(n_tensors_, 4096));
    offset_pos_.reserve(std::min<uint64_t>(n_tensors_, 4096));
    for (uint64_t i = 0; i < n_tensors_; ++i) {
      TensorInfo t{};
      std::string_view name;
      HEARTH_TRY(read_string(name, "tensor " + std::to_string(i) + " name"));
      t.name = std::string(name);
      std::string what = "tensor " + quoted(name);

      uint64_t at = pos_;
      uint32_t n_dims = 0;
      HEARTH_TRY(read(n_dims, what + ": n_dims"));
      if (n_dims < 1 || n_dims > 4) return fail(at, what + ": n_dims " + std::to_string(n_dims) + " is outside 1..4");
      t.n_dims = static_cast<int>(n_dims);
      int64_t n_elements = 1;
      for (int d = 0; d < 4; ++d) t.ne[d] = 1;
      for (uint32_t d = 0; d < n_dims; ++d) {
        at = pos_;
        uint64_t ne = 0;
        HEARTH_TRY(read(ne, what + ": dimension"));
        if (ne < 1 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
          return fail(
              at, what + ": dimension " + std::to_string(d) + " is " + std::to_string(ne) + " (must be at least 1)");
        t.ne[d] = static_cast<int64_t>(ne);
        if (__builtin_mul_overflow(n_elements, t.ne[d], &n_elements))
          return fail(at, what + ": element count overflows 64 bits");
      }

      at = pos_;
      uint32_t type_id = 0;
      HEARTH_TRY(read(type_id, what + ": type"));
      std::optional<DTypeInfo> info = dtype_info(type_id);
      if (!info) return fail(at, what + ": unknown tensor type id " + std::to_string(type_id));
      if (!info->supported) return fail(at, what + ": tensor type " + info->name + " is not supported by hearth");
      t.type = static_cast<DType>(type_id);
      if (t.ne[0] % info->block_elems != 0)
        return fail(at, what + ": row length " + std::to_string(t.ne[0]) + " is not a multiple of the " + info->name +
                            " block size " + std::to_string(info->block_elems));
      uint64_t blocks = static_cast<uint64_t>(n_elements / info->block_elems);
      if (__builtin_mul_overflow(blocks, static_cast<uint64_t>(info->block_bytes), &t.n_bytes))
        return fail(at, what + ": byte size overflows 64 bits");

      at = pos_;
      HEARTH_TRY(read(t.offset, what + ": offset"));
      if (t.offset % f_.alignment_ != 0)
        return fail(at, what + ": offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                            std::to_string(f_.alignment_));
      offset_pos_.push_back(at);
      f_.tensors_.push_back(std::move(t));
    }
    return {};
  }

  Status tensor_data() {
    uint64_t pad = (f_.alignment_ - pos_ % f_.alignment_) % f_.alignment_;
    if (__builtin_add_overflow(pos_, pad, &f_.data_offset_)) return fail(pos_, "data section offset overflows 64 bits");
    auto& tensors = f_.tensors_;
    for (size_t i = 0; i < tensors.size(); ++i) {
      TensorInfo& t = tensors[i];
      uint64_t begin = 0, end = 0;
      if (__builtin_add_overflow(f_.data_offset_, t.offset, &begin) || __builtin_add_overflow(begin, t.n_bytes, &end) ||
          end > size_)
        return fail(offset_pos_[i], "tensor " + quoted(t.name) + ": data [" + std::to_string(begin) + ", " +
                                        (end < begin ? std::string("overflow") : std::to_string(end)) +
                                        ") extends past end of file (size " + std::to_string(size_) + ")");
      t.data = p_ + begin;
    }

    std::vector<uint32_t> by_offset(tensors.size());
    for (uint32_t i = 0; i < by_offset.size(); ++i) by_offset[i] = i;
    std::sort(by_offset.begin(), by_offset.end(),
              [&](uint32_t a, uint32_t b) { return tensors[a].offset < tensors[b].offset; });
    for (size_t k = 1; k < by_offset.size(); ++k) {
      const TensorInfo& a = tensors[by_offset[k - 1]];
      const TensorInfo& b = tensors[by_offset[k]];
      if (a.offset + a.n_bytes > b.offset)
        return fail(offset_pos_[by_offset[k]], "tensor " + quoted(b.name) + " at data offset " +
                                                   std::to_string(b.offset) + " overlaps tensor " + quoted(a.name) +
                                                   " at data [" + std::to_string(a.offset) + ", " +
                                                   std::to_string(a.offset + a.n_bytes) + ")");
    }

    auto& idx = f_.sorted_tensors_;
    idx.resize(tensors.size());
    for (uint32_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) { return tensors[a].name < tensors[b].name; });
    for (size_t k = 1; k < idx.size(); ++k)
      if (tensors[idx[k - 1]].name == tensors[idx[k]].name)
        return fail(offset_pos_[idx[k]], "duplicate tensor name " + quoted(tensors[idx[k]].name));
    return {};
  }

  File& f_;
  const uint8_t* p_;
  uint64_t size_;
  uint64_t pos_ = 0;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
  std::vector<uint64_t> offset_pos_;  // byte offset of each tensor's offset field
};

Result<std::unique_ptr<File>> File::from_memory(const void* data, size_t size) {
  std::unique_ptr<File> f(new (std::nothrow) File());
  if (!f) return make_error("gguf: out of memory");
  f->base_ = static_cast<const uint8_t*>(data);
  f->size_ = size;
  try {
    Status s = Parser(*f).run();
    if (!s.ok()) return s.error();
  } catch (const std::bad_alloc&) {
    return make_error("gguf: out of memory while reading the file's metadata");
  }
  return f;
}

Result<std::unique_ptr<File>> File::open(const std::string& path) {
  auto sys_error = [&](const char* what) {
    return make_error("gguf: " + path + ": " + what + ": " + std::strerror(errno));
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return sys_error("cannot open");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    auto e = sys_error("cannot stat");
    ::close(fd);
    return e;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error("gguf: " + path + ": not a regular file");
  }
  size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    return make_error("gguf: " + path + ": empty file (at byte 0)");
  }
  void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) return sys_error("cannot mmap");
  auto r = from_memory(m, size);
  if (!r.ok()) {
    ::munmap(m, size);
    std::string msg = r.error().message;
    if (msg.rfind("gguf: ", 0) == 0) msg = msg.substr(6);
    return make_error("gguf: " + path + ": " + msg);
  }
  (*r)->mapping_ = m;
  (*r)->path_ = path;
  return r;
}

File::~File() {
  if (mapping_) ::munmap(mapping_, size_);
}

}  // namespace hearth::gguf
