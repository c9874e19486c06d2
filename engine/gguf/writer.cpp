#include "engine/gguf/writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <bit>
#include <cassert>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace hearth::gguf {
namespace {

template <class T>
void put(std::vector<uint8_t>& out, T v) {
  size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

void put_string(std::vector<uint8_t>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  size_t at = out.size();
  out.resize(at + s.size());
  if (!s.empty()) std::memcpy(out.data() + at, s.data(), s.size());
}

template <class T>
std::vector<uint8_t> bytes_of(T v) {
  std::vector<uint8_t> out;
  put(out, v);
  return out;
}

template <class T>
std::vector<uint8_t> array_payload(ValueType elem, const std::vector<T>& v) {
  std::vector<uint8_t> out;
  put<uint32_t>(out, static_cast<uint32_t>(elem));
  put<uint64_t>(out, v.size());
  for (const T& x : v) put(out, x);
  return out;
}

void pad_to(std::vector<uint8_t>& out, uint64_t alignment) {
  out.resize((out.size() + alignment - 1) / alignment * alignment, 0);
}

}  // namespace

Writer::Writer(uint32_t version) : version_(version) {
  assert(version == 2 || version == 3);
}

void Writer::set(std::string key, ValueType type, std::vector<uint8_t> payload) {
  for (Kv& kv : kvs_) {
    if (kv.key == key) {
      kv.type = type;
      kv.payload = std::move(payload);
      return;
    }
  }
  kvs_.push_back(Kv{std::move(key), type, std::move(payload)});
}

void Writer::set_alignment(uint64_t a) {
  assert(a != 0 && std::has_single_bit(a) && a <= UINT32_MAX);
  alignment_ = a;
  set_u32("general.alignment", static_cast<uint32_t>(a));
}

void Writer::set_u8(std::string key, uint8_t v) {
  set(std::move(key), ValueType::U8, bytes_of(v));
}
void Writer::set_i8(std::string key, int8_t v) {
  set(std::move(key), ValueType::I8, bytes_of(v));
}
void Writer::set_u16(std::string key, uint16_t v) {
  set(std::move(key), ValueType::U16, bytes_of(v));
}
void Writer::set_i16(std::string key, int16_t v) {
  set(std::move(key), ValueType::I16, bytes_of(v));
}
void Writer::set_u32(std::string key, uint32_t v) {
  set(std::move(key), ValueType::U32, bytes_of(v));
}
void Writer::set_i32(std::string key, int32_t v) {
  set(std::move(key), ValueType::I32, bytes_of(v));
}
void Writer::set_u64(std::string key, uint64_t v) {
  set(std::move(key), ValueType::U64, bytes_of(v));
}
void Writer::set_i64(std::string key, int64_t v) {
  set(std::move(key), ValueType::I64, bytes_of(v));
}
void Writer::set_f32(std::string key, float v) {
  set(std::move(key), ValueType::F32, bytes_of(v));
}
void Writer::set_f64(std::string key, double v) {
  set(std::move(key), ValueType::F64, bytes_of(v));
}
void Writer::set_bool(std::string key, bool v) {
  set(std::move(key), ValueType::BOOL, bytes_of<uint8_t>(v ? 1 : 0));
}

void Writer::set_string(std::string key, std::string_view v) {
  std::vector<uint8_t> p;
  put_string(p, v);
  set(std::move(key), ValueType::STRING, std::move(p));
}

void Writer::set_string_array(std::string key, const std::vector<std::string>& v) {
  std::vector<uint8_t> p;
  put<uint32_t>(p, static_cast<uint32_t>(ValueType::STRING));
  put<uint64_t>(p, v.size());
  for (const std::string& s : v) put_string(p, s);
  set(std::move(key), ValueType::ARRAY, std::move(p));
}

void Writer::set_f32_array(std::string key, const std::vector<float>& v) {
  set(std::move(key), ValueType::ARRAY, array_payload(ValueType::F32, v));
}
void Writer::set_i32_array(std::string key, const std::vector<int32_t>& v) {
  set(std::move(key), ValueType::ARRAY, array_payload(ValueType::I32, v));
}
void Writer::set_u32_array(std::string key, const std::vector<uint32_t>& v) {
  set(std::move(key), ValueType::ARRAY, array_payload(ValueType::U32, v));
}

void Writer::set_array(std::string key, ValueType elem, std::vector<uint8_t> payload, uint64_t count) {
  std::vector<uint8_t> p;
  put<uint32_t>(p, static_cast<uint32_t>(elem));
  put<uint64_t>(p, count);
  p.insert(p.end(), payload.begin(), payload.end());
  set(std::move(key), ValueType::ARRAY, std::move(p));
}

void Writer::set_raw(std::string key, ValueType type, std::vector<uint8_t> payload) {
  set(std::move(key), type, std::move(payload));
}

void Writer::add_tensor(std::string name, DType type, std::vector<int64_t> ne, std::vector<uint8_t> data) {
  assert(!ne.empty() && ne.size() <= 4);
  int64_t rows = 1;
  for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
  assert(ne[0] % dtype_info(type).block_elems == 0);
  assert(data.size() == row_bytes(type, ne[0]) * static_cast<size_t>(rows));
  (void)rows;
  tensors_.push_back(Tensor{std::move(name), type, std::move(ne), std::move(data)});
}

std::vector<uint8_t> Writer::serialize() const {
  std::vector<uint8_t> out = {'G', 'G', 'U', 'F'};
  put<uint32_t>(out, version_);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, kvs_.size());
  for (const Kv& kv : kvs_) {
    put_string(out, kv.key);
    put<uint32_t>(out, static_cast<uint32_t>(kv.type));
    out.insert(out.end(), kv.payload.begin(), kv.payload.end());
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_string(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
    for (int64_t n : t.ne) put<uint64_t>(out, static_cast<uint64_t>(n));
    put<uint32_t>(out, static_cast<uint32_t>(t.type));
    put<uint64_t>(out, offset);
    offset += (t.data.size() + alignment_ - 1) / alignment_ * alignment_;
  }
  pad_to(out, alignment_);
  for (const Tensor& t : tensors_) {
    out.insert(out.end(), t.data.begin(), t.data.end());
    pad_to(out, alignment_);
  }
  return out;
}

Status Writer::write_file(const std::string& path) const {
  std::vector<uint8_t> bytes = serialize();
  std::string tmp = path + ".tmp";
  auto fail = [&](const char* what) { return make_error("gguf: " + tmp + ": " + what + ": " + std::strerror(errno)); };
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return fail("cannot create");
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Error e = fail("write failed");
      ::close(fd);
      ::unlink(tmp.c_str());
      return e;
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    Error e = fail("fsync failed");
    ::close(fd);
    ::unlink(tmp.c_str());
    return e;
  }
  if (::close(fd) != 0) {
    Error e = fail("close failed");
    ::unlink(tmp.c_str());
    return e;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    Error e = fail("rename failed");
    ::unlink(tmp.c_str());
    return e;
  }
  return {};
}

}  // namespace hearth::gguf
