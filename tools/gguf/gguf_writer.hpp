// GGUF v3 files (llama.cpp's model format, ggml/include/gguf.h), written:
//   "GGUF" | u32 version 3 | u64 tensor count | u64 metadata count
//   metadata: { string key | u32 value type | value }*       (string = u64 length + bytes)
//   tensor infos: { string name | u32 n_dims | u64 ne[n_dims] | u32 ggml type | u64 offset }*
//   zero padding to general.alignment, then the tensor data, each tensor at its offset
//   (relative to the data section) and padded to the alignment.
// ne[0] is the innermost (contiguous) dimension, so a row-major [rows, cols] matrix is
// ne = {cols, rows}. Everything is little-endian.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "model/gguf.hpp"

namespace specd::gguf {

inline constexpr uint32_t kVersion = 3;
inline constexpr uint32_t kDefaultAlignment = model::gguf::kDefaultAlignment;

// GGUF metadata value types: the reader's (core/src/model/gguf.hpp).
using ValueType = model::gguf::ValueType;

// Tensor element types this writer's converter produces (ggml_type values). add_tensor()
// accepts any ggml type id (cast to TensorType) whose block size model::gguf::type_info knows,
// for tests that write pre-encoded blocks.
enum class TensorType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kBF16 = 30
};
std::string_view tensor_type_name(TensorType type);  // "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", ...
// Bytes of a tensor of `numel` elements (numel a multiple of the type's block).
uint64_t tensor_bytes(TensorType type, uint64_t numel);
// A tensor_type_name; throws specd::Error(kInvalidArgument) otherwise.
TensorType parse_tensor_type(std::string_view text);

// Collects metadata and tensors, then writes the file in one pass. Keys and tensor names must
// be unique (a repeat throws kInvalidArgument naming it).
class Writer {
 public:
  explicit Writer(uint32_t alignment = kDefaultAlignment);

  void set_u32(std::string_view key, uint32_t value);
  void set_f32(std::string_view key, float value);
  void set_bool(std::string_view key, bool value);
  void set_string(std::string_view key, std::string_view value);
  void set_strings(std::string_view key, const std::vector<std::string>& values);
  void set_f32s(std::string_view key, const std::vector<float>& values);
  void set_i32s(std::string_view key, const std::vector<int32_t>& values);

  // `write_data` must write exactly tensor_bytes(type, numel(ne)) bytes; it runs during write(),
  // in the order tensors were added. ne[0] must hold whole blocks of the type.
  void add_tensor(std::string name, std::vector<uint64_t> ne, TensorType type,
                  std::function<void(std::ostream&)> write_data);

  size_t tensor_count() const { return tensors_.size(); }

  // Writes <file>.tmp.<pid>.<n> and renames it over `file`, so a failed write leaves no partial file.
  // Throws specd::Error naming the file on I/O errors, and kInternal naming the tensor when a
  // write_data callback wrote the wrong number of bytes.
  void write(const std::filesystem::path& file) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> ne;
    TensorType type;
    uint64_t nbytes = 0;
    uint64_t offset = 0;
    std::function<void(std::ostream&)> write_data;
  };
  void begin_value(std::string_view key, ValueType type);
  void begin_array(std::string_view key, ValueType element_type, uint64_t count);

  uint32_t alignment_;
  std::string metadata_;  // the encoded metadata entries, back to back
  std::vector<std::string> keys_;
  std::vector<Tensor> tensors_;
  uint64_t next_offset_ = 0;  // data-section offset of the next tensor
};

}  // namespace specd::gguf
