#include "fetch/gguf_head.h"

#include <cstring>
#include <optional>
#include <string_view>

namespace hearth::fetch {

namespace {

constexpr uint64_t kMaxStringBytes = 1 << 20;
constexpr uint32_t kString = 8, kArray = 9;

// A cursor over the prefix; every read says whether the bytes were there.
struct Cursor {
  const uint8_t* data;
  size_t n;
  size_t pos = 0;

  template <class T>
  std::optional<T> read() {
    if (n - pos < sizeof(T)) return std::nullopt;
    T v;
    std::memcpy(&v, data + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  bool skip(uint64_t bytes) {
    if (n - pos < bytes) return false;
    pos += static_cast<size_t>(bytes);
    return true;
  }
};

// Bytes of one value of a fixed-size type; 0 for strings, arrays and unknown types.
uint64_t scalar_bytes(uint32_t type) {
  switch (type) {
    case 0:
    case 1:
    case 7:
      return 1;  // U8, I8, BOOL
    case 2:
    case 3:
      return 2;  // U16, I16
    case 4:
    case 5:
    case 6:
      return 4;  // U32, I32, F32
    case 10:
    case 11:
    case 12:
      return 8;  // U64, I64, F64
    default:
      return 0;
  }
}

enum class Step { kOk, kNeedMore, kBad };

Step read_string(Cursor& c, std::string_view* out, std::string* error) {
  std::optional<uint64_t> len = c.read<uint64_t>();
  if (!len) return Step::kNeedMore;
  if (*len > kMaxStringBytes) {
    *error = "a string of " + std::to_string(*len) + " bytes at byte " + std::to_string(c.pos - 8);
    return Step::kBad;
  }
  if (c.n - c.pos < *len) return Step::kNeedMore;
  if (out) *out = std::string_view(reinterpret_cast<const char*>(c.data + c.pos), static_cast<size_t>(*len));
  c.pos += static_cast<size_t>(*len);
  return Step::kOk;
}

Step skip_value(Cursor& c, uint32_t type, std::string* error) {
  if (type == kString) return read_string(c, nullptr, error);
  if (const uint64_t b = scalar_bytes(type)) return c.skip(b) ? Step::kOk : Step::kNeedMore;
  if (type != kArray) {
    *error = "unknown value type " + std::to_string(type) + " at byte " + std::to_string(c.pos);
    return Step::kBad;
  }
  std::optional<uint32_t> elem = c.read<uint32_t>();
  std::optional<uint64_t> count = elem ? c.read<uint64_t>() : std::nullopt;
  if (!count) return Step::kNeedMore;
  if (const uint64_t b = scalar_bytes(*elem)) {
    if (*count > UINT64_MAX / b) {
      *error = "an array of " + std::to_string(*count) + " elements";
      return Step::kBad;
    }
    return c.skip(*count * b) ? Step::kOk : Step::kNeedMore;
  }
  if (*elem != kString) {
    *error = "an array of type " + std::to_string(*elem) + " (only scalars and strings are arrays' elements)";
    return Step::kBad;
  }
  for (uint64_t i = 0; i < *count; ++i)
    if (Step s = read_string(c, nullptr, error); s != Step::kOk) return s;
  return Step::kOk;
}

}  // namespace

GgufHead read_gguf_head(const uint8_t* data, size_t n) {
  GgufHead head;
  Cursor c{data, n};
  std::optional<uint32_t> magic = c.read<uint32_t>();
  std::optional<uint32_t> version = magic ? c.read<uint32_t>() : std::nullopt;
  if (magic && std::memcmp(data, "GGUF", 4) != 0) {
    head.state = GgufHead::State::kBad;
    head.error = "not a GGUF file (it does not start with \"GGUF\")";
    return head;
  }
  if (version && (*version < 2 || *version > 3)) {
    head.state = GgufHead::State::kBad;
    head.error = "GGUF version " + std::to_string(*version) + " (hearth reads versions 2 and 3)";
    return head;
  }
  std::optional<uint64_t> n_tensors = version ? c.read<uint64_t>() : std::nullopt;
  std::optional<uint64_t> n_kv = n_tensors ? c.read<uint64_t>() : std::nullopt;
  if (!n_kv) return head;
  for (uint64_t i = 0; i < *n_kv; ++i) {
    std::string_view key;
    Step s = read_string(c, &key, &head.error);
    std::optional<uint32_t> type = s == Step::kOk ? c.read<uint32_t>() : std::nullopt;
    if (s == Step::kOk && !type) s = Step::kNeedMore;
    if (s == Step::kOk && key == "general.architecture" && *type == kString) {
      std::string_view arch;
      s = read_string(c, &arch, &head.error);
      if (s == Step::kOk) {
        head.state = GgufHead::State::kFound;
        head.arch = std::string(arch);
        return head;
      }
    } else if (s == Step::kOk) {
      s = skip_value(c, *type, &head.error);
    }
    if (s == Step::kNeedMore) return head;
    if (s == Step::kBad) {
      head.state = GgufHead::State::kBad;
      head.error = "damaged GGUF header: " + head.error;
      return head;
    }
  }
  head.state = GgufHead::State::kBad;
  head.error = "the GGUF header has no general.architecture";
  return head;
}

Result<GgufLayout> gguf_layout(const uint8_t* data, size_t n) {
  GgufLayout out;
  Cursor c{data, n};
  std::string error;
  std::optional<uint32_t> magic = c.read<uint32_t>();
  std::optional<uint32_t> version = c.read<uint32_t>();
  std::optional<uint64_t> n_tensors = c.read<uint64_t>();
  std::optional<uint64_t> n_kv = c.read<uint64_t>();
  if (!n_kv || std::memcmp(data, "GGUF", 4) != 0 || *version < 2 || *version > 3)
    return make_error("not a GGUF file of version 2 or 3");
  (void)magic;
  out.version = *version;
  auto truncated = [&] { return make_error("the GGUF header ends early, at byte " + std::to_string(c.pos)); };
  for (uint64_t i = 0; i < *n_kv; ++i) {
    GgufLayout::Range r;
    r.begin = c.pos;
    std::string_view key;
    Step s = read_string(c, &key, &error);
    std::optional<uint32_t> type = s == Step::kOk ? c.read<uint32_t>() : std::nullopt;
    if (s == Step::kOk) s = type ? skip_value(c, *type, &error) : Step::kNeedMore;
    if (s == Step::kBad) return make_error("damaged GGUF header: " + error);
    if (s == Step::kNeedMore) return truncated();
    r.key = std::string(key);
    r.end = c.pos;
    out.kvs.push_back(std::move(r));
  }
  for (uint64_t i = 0; i < *n_tensors; ++i) {
    GgufLayout::Range r;
    r.begin = c.pos;
    std::string_view name;
    Step s = read_string(c, &name, &error);
    if (s == Step::kBad) return make_error("damaged GGUF tensor info: " + error);
    std::optional<uint32_t> n_dims = s == Step::kOk ? c.read<uint32_t>() : std::nullopt;
    if (!n_dims) return truncated();
    if (*n_dims > 4) return make_error("a tensor of " + std::to_string(*n_dims) + " dimensions");
    if (!c.skip(8ull * *n_dims + 4 + 8)) return truncated();  // dims, type, offset
    r.key = std::string(name);
    r.end = c.pos;
    out.tensors.push_back(std::move(r));
  }
  return out;
}

}  // namespace hearth::fetch
