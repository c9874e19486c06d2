// Typed access to metadata values. Values were validated in bounds while loading, so these
// read straight from the file's bytes; only type mismatches and range errors remain.
#include <algorithm>
#include <cstring>
#include <limits>
#include <new>

#include "engine/gguf/gguf.h"
#include "engine/gguf/internal.h"

namespace hearth::gguf {
namespace {

bool is_integer(ValueType t) {
  switch (t) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::U16:
    case ValueType::I16:
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::U64:
    case ValueType::I64:
      return true;
    default:
      return false;
  }
}

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// An integer of type t at p, as (value, negative). U64 values above INT64_MAX are returned
// as their unsigned bits with negative == false.
struct Int {
  uint64_t bits;
  bool negative;
};

Int load_int(ValueType t, const uint8_t* p) {
  auto s = [](int64_t v) { return Int{static_cast<uint64_t>(v), v < 0}; };
  switch (t) {
    case ValueType::U8:
    case ValueType::BOOL:
      return {load<uint8_t>(p), false};
    case ValueType::I8:
      return s(load<int8_t>(p));
    case ValueType::U16:
      return {load<uint16_t>(p), false};
    case ValueType::I16:
      return s(load<int16_t>(p));
    case ValueType::U32:
      return {load<uint32_t>(p), false};
    case ValueType::I32:
      return s(load<int32_t>(p));
    case ValueType::U64:
      return {load<uint64_t>(p), false};
    case ValueType::I64:
      return s(load<int64_t>(p));
    default:
      return {0, false};
  }
}

std::string_view load_string(const uint8_t* p, uint64_t* advance) {
  uint64_t len = load<uint64_t>(p);
  *advance = 8 + len;
  return std::string_view(reinterpret_cast<const char*>(p + 8), len);
}

}  // namespace

const char* value_type_name(ValueType t) {
  switch (t) {
    case ValueType::U8:
      return "U8";
    case ValueType::I8:
      return "I8";
    case ValueType::U16:
      return "U16";
    case ValueType::I16:
      return "I16";
    case ValueType::U32:
      return "U32";
    case ValueType::I32:
      return "I32";
    case ValueType::F32:
      return "F32";
    case ValueType::BOOL:
      return "BOOL";
    case ValueType::STRING:
      return "STRING";
    case ValueType::ARRAY:
      return "ARRAY";
    case ValueType::U64:
      return "U64";
    case ValueType::I64:
      return "I64";
    case ValueType::F64:
      return "F64";
  }
  return "unknown";
}

int64_t TensorInfo::n_elements() const {
  int64_t n = 1;
  for (int d = 0; d < n_dims; ++d) n *= ne[d];
  return n;
}

int64_t TensorInfo::n_rows() const {
  return n_elements() / ne[0];
}

const File::Value* File::find(std::string_view key) const {
  auto it = std::lower_bound(sorted_values_.begin(), sorted_values_.end(), key,
                             [&](uint32_t i, std::string_view k) { return values_[i].key < k; });
  if (it == sorted_values_.end() || values_[*it].key != key) return nullptr;
  return &values_[*it];
}

Result<const File::Value*> File::need(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return make_error("gguf: metadata key '" + std::string(key) + "' not found");
  return v;
}

namespace {
Error wrong_type(const File::Value& v, const char* want) {
  std::string have = value_type_name(v.type);
  if (v.type == ValueType::ARRAY) have += std::string(" of ") + value_type_name(v.elem_type);
  return make_error("gguf: metadata key '" + std::string(v.key) + "' is " + have + ", expected " + want + " (at byte " +
                    std::to_string(v.key_pos) + ")");
}
Error out_of_range(const File::Value& v, const std::string& what) {
  return make_error("gguf: metadata key '" + std::string(v.key) + "': " + what + " (at byte " + std::to_string(v.pos) +
                    ")");
}
// Arrays are bounded by the file size, but an element may take more memory than its bytes.
Error out_of_memory(const File::Value& v) {
  return make_error("gguf: out of memory reading the " + std::to_string(v.count) + " elements of '" +
                    std::string(v.key) + "' (at byte " + std::to_string(v.pos) + ")");
}
}  // namespace

bool File::has(std::string_view key) const {
  return find(key) != nullptr;
}

std::optional<ValueType> File::type_of(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  return v->type;
}

std::optional<ValueType> File::array_elem_type(std::string_view key) const {
  const Value* v = find(key);
  if (!v || v->type != ValueType::ARRAY) return std::nullopt;
  return v->elem_type;
}

std::optional<uint64_t> File::array_length(std::string_view key) const {
  const Value* v = find(key);
  if (!v || v->type != ValueType::ARRAY) return std::nullopt;
  return v->count;
}

Result<std::string_view> File::get_string(std::string_view key) const {
  auto r = need(key);
  if (!r.ok()) return r.error();
  const Value& v = **r;
  if (v.type != ValueType::STRING) return wrong_type(v, "STRING");
  uint64_t adv = 0;
  return load_string(base_ + v.pos, &adv);
}

Result<uint64_t> File::get_uint(std::string_view key) const {
  auto r = need(key);
  if (!r.ok()) return r.error();
  const Value& v = **r;
  if (!is_integer(v.type)) return wrong_type(v, "an integer");
  Int i = load_int(v.type, base_ + v.pos);
  if (i.negative) return out_of_range(v, "value " + std::to_string(static_cast<int64_t>(i.bits)) + " is negative");
  return i.bits;
}

Result<int64_t> File::get_int(std::string_view key) const {
  auto r = need(key);
  if (!r.ok()) return r.error();
  const Value& v = **r;
  if (!is_integer(v.type)) return wrong_type(v, "an integer");
  Int i = load_int(v.type, base_ + v.pos);
  if (!i.negative && i.bits > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return out_of_range(v, "value " + std::to_string(i.bits) + " does not fit in a signed 64-bit integer");
  return static_cast<int64_t>(i.bits);
}

Result<double> File::get_float(std::string_view key) const {
  auto r = need(key);
  if (!r.ok()) return r.error();
  const Value& v = **r;
  if (v.type == ValueType::F32) return static_cast<double>(load<float>(base_ + v.pos));
  if (v.type == ValueType::F64) return load<double>(base_ + v.pos);
  if (!is_integer(v.type)) return wrong_type(v, "a number");
  Int i = load_int(v.type, base_ + v.pos);
  return i.negative ? static_cast<double>(static_cast<int64_t>(i.bits)) : static_cast<double>(i.bits);
}

Result<bool> File::get_bool(std::string_view key) const {
  auto r = need(key);
  if (!r.ok()) return r.error();
  const Value& v = **r;
  if (v.type != ValueType::BOOL) return wrong_type(v, "BOOL");
  uint8_t b = base_[v.pos];
  if (b > 1) return out_of_range(v, "BOOL value " + std::to_string(b) + " is neither 0 nor 1");
  return b == 1;
}

Result<std::vector<std::string_view>> File::get_string_array(std::string_view key) const {
  auto r = need(key);
  if (!r.ok()) return r.error();
  const Value& v = **r;
  if (v.type != ValueType::ARRAY || v.elem_type != ValueType::STRING) return wrong_type(v, "ARRAY of STRING");
  try {
    std::vector<std::string_view> out;
    out.reserve(v.count);  // bounded while loading: count <= remaining bytes / 8
    const uint8_t* p = base_ + v.pos;
    for (uint64_t i = 0; i < v.count; ++i) {
      uint64_t adv = 0;
      out.push_back(load_string(p, &adv));
      p += adv;
    }
    return out;
  } catch (const std::bad_alloc&) {
    return out_of_memory(v);
  }
}

Result<std::vector<float>> File::get_f32_array(std::string_view key) const {
  auto r = need(key);
  if (!r.ok()) return r.error();
  const Value& v = **r;
  if (v.type != ValueType::ARRAY || (v.elem_type != ValueType::F32 && v.elem_type != ValueType::F64))
    return wrong_type(v, "ARRAY of F32 or F64");
  try {
    std::vector<float> out(v.count);
    const uint8_t* p = base_ + v.pos;
    for (uint64_t i = 0; i < v.count; ++i)
      out[i] = v.elem_type == ValueType::F32 ? load<float>(p + 4 * i) : static_cast<float>(load<double>(p + 8 * i));
    return out;
  } catch (const std::bad_alloc&) {
    return out_of_memory(v);
  }
}

Result<std::vector<int64_t>> File::get_int_array(std::string_view key) const {
  auto r = need(key);
  if (!r.ok()) return r.error();
  const Value& v = **r;
  if (v.type != ValueType::ARRAY || (!is_integer(v.elem_type) && v.elem_type != ValueType::BOOL))
    return wrong_type(v, "ARRAY of integers");
  uint64_t size = value_size(v.elem_type);
  try {
    std::vector<int64_t> out(v.count);
    const uint8_t* p = base_ + v.pos;
    for (uint64_t i = 0; i < v.count; ++i) {
      Int x = load_int(v.elem_type, p + size * i);
      if (!x.negative && x.bits > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return out_of_range(v, "element " + std::to_string(i) + " value " + std::to_string(x.bits) +
                                   " does not fit in a signed 64-bit integer");
      out[i] = static_cast<int64_t>(x.bits);
    }
    return out;
  } catch (const std::bad_alloc&) {
    return out_of_memory(v);
  }
}

Result<uint64_t> File::get_uint_or(std::string_view key, uint64_t def) const {
  return has(key) ? get_uint(key) : Result<uint64_t>(def);
}

Result<double> File::get_float_or(std::string_view key, double def) const {
  return has(key) ? get_float(key) : Result<double>(def);
}

Result<bool> File::get_bool_or(std::string_view key, bool def) const {
  return has(key) ? get_bool(key) : Result<bool>(def);
}

std::vector<std::string> File::keys() const {
  std::vector<std::string> out;
  out.reserve(values_.size());
  for (const Value& v : values_) out.emplace_back(v.key);
  return out;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = std::lower_bound(sorted_tensors_.begin(), sorted_tensors_.end(), name,
                             [&](uint32_t i, std::string_view n) { return tensors_[i].name < n; });
  if (it == sorted_tensors_.end() || tensors_[*it].name != name) return nullptr;
  return &tensors_[*it];
}

}  // namespace hearth::gguf
