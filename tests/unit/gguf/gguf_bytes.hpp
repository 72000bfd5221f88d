// GGUF files assembled byte by byte for the reader's tests: any value type, nesting, count or
// offset can be written, including the malformed ones the hostile-file corpus needs.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace specd::gguf::test {

class Bytes {
 public:
  template <typename T>
  Bytes& raw(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    data.append(b, sizeof(T));
    return *this;
  }
  Bytes& u32(uint32_t v) { return raw(v); }
  Bytes& u64(uint64_t v) { return raw(v); }
  Bytes& str(std::string_view s) {
    u64(s.size());
    data.append(s);
    return *this;
  }
  // A metadata entry: key, type, then the caller appends the value.
  Bytes& key(std::string_view k, uint32_t type) { return str(k).u32(type); }
  Bytes& pad_to(size_t alignment) {
    while (data.size() % alignment != 0) data.push_back('\0');
    return *this;
  }
  size_t size() const { return data.size(); }
  std::string data;
};

// gguf_type / ggml_type ids.
inline constexpr uint32_t kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7, kStr = 8,
                          kArr = 9, kU64 = 10, kI64 = 11, kF64 = 12;
inline constexpr uint32_t kGgmlF32 = 0, kGgmlQ8_0 = 8;

struct TensorSpec {
  std::string name;
  std::vector<uint64_t> ne;
  uint32_t type = kGgmlF32;
  uint64_t offset = 0;
};

// A complete little file: header, `kv_count` entries already encoded in `metadata`, tensor
// infos, padding to `alignment` and `data_bytes` of data. The header counts are written as
// given, so a test can lie in them.
inline std::string assemble(uint32_t version, uint64_t tensor_count, uint64_t kv_count, const std::string& metadata,
                            const std::vector<TensorSpec>& tensors, size_t alignment, size_t data_bytes) {
  Bytes b;
  b.data = "GGUF";
  b.u32(version).u64(tensor_count).u64(kv_count);
  b.data += metadata;
  for (const TensorSpec& t : tensors) {
    b.str(t.name).u32(static_cast<uint32_t>(t.ne.size()));
    for (uint64_t d : t.ne) b.u64(d);
    b.u32(t.type).u64(t.offset);
  }
  b.pad_to(alignment);
  for (size_t i = 0; i < data_bytes; ++i) b.data.push_back(static_cast<char>(i * 7));
  return b.data;
}

}  // namespace specd::gguf::test
