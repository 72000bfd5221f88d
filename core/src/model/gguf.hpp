// GGUF, llama.cpp's model container (versions 2 and 3, little-endian), read in place:
//   "GGUF" | u32 version | u64 tensor count | u64 metadata count
//   metadata: { string key | u32 value type | value }*      string = u64 length + bytes
//             an array value is u32 element type | u64 count | the elements (arrays nest)
//   tensor infos: { string name | u32 n_dims | u64 ne[n_dims] | u32 ggml type | u64 offset }*
//   padding to general.alignment (default 32), then the data section; each tensor's offset is
//   relative to the data section and a multiple of the alignment.
// ne[0] is the innermost (contiguous) dimension: a row-major [rows, cols] matrix is ne = {cols,
// rows}.
//
// The file is untrusted. Every count, length, offset and size is checked against the bytes
// that remain before anything is allocated for it; nested arrays are read with an explicit
// stack, at most kMaxArrayDepth deep. Every refusal is a specd::Error(kModelFormat, or
// kUnsupported for a well-formed file specd does not read) whose message starts with the file
// and names the field or tensor and the offending value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/mapped_file.hpp"

namespace specd::model::gguf {

inline constexpr uint32_t kDefaultAlignment = 32;
inline constexpr uint32_t kMaxArrayDepth = 8;  // arrays of arrays of ... (the outermost is depth 1)
inline constexpr uint32_t kMaxDims = 4;        // GGML_MAX_DIMS

// gguf_type.
enum class ValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
std::string_view value_type_name(ValueType type) noexcept;  // "u32", "string", "array", ...

// ggml_type: the element encodings a tensor may have. `block` elements are stored in `bytes`
// bytes; block == 0 for an id that ggml does not (or no longer) define.
struct TypeInfo {
  std::string_view name;  // "F32", "Q4_K", ...
  uint32_t block = 0;
  uint32_t bytes = 0;
};
inline constexpr uint32_t kTypeF32 = 0, kTypeF16 = 1, kTypeQ4_0 = 2, kTypeQ4_1 = 3, kTypeQ5_0 = 6, kTypeQ5_1 = 7,
                          kTypeQ8_0 = 8, kTypeQ2_K = 10, kTypeQ3_K = 11, kTypeQ4_K = 12, kTypeQ5_K = 13, kTypeQ6_K = 14,
                          kTypeQ8_K = 15, kTypeBF16 = 30;
const TypeInfo& type_info(uint32_t ggml_type) noexcept;  // block == 0 for unknown ids
std::string type_name(uint32_t ggml_type);               // "Q6_K", or "type 77" for an unknown id

// One metadata value. Scalars and strings are read on access; arrays keep their element type
// and count, and index their elements (strings and nested arrays through File).
struct Value {
  ValueType type = ValueType::kUint8;
  ValueType elem_type = ValueType::kUint8;  // arrays only
  uint64_t count = 0;                       // arrays: elements; strings: bytes
  const std::byte* raw = nullptr;           // scalar bytes, string bytes, or numeric array elements
  size_t first = 0;                         // string arrays: File::strings_ index; nested: File::values_ index

  bool is_integer() const;
  bool is_float() const { return type == ValueType::kFloat32 || type == ValueType::kFloat64; }
};

struct TensorInfo {
  std::string_view name;
  uint32_t n_dims = 0;
  uint64_t ne[kMaxDims] = {1, 1, 1, 1};
  uint32_t type = 0;    // ggml_type
  uint64_t offset = 0;  // relative to the data section
  uint64_t nbytes = 0;
  const std::byte* data = nullptr;  // in the file's bytes
  uint64_t numel() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

class File {
 public:
  // Maps `path` and parses it (see the header comment for the errors).
  static std::shared_ptr<const File> open(const std::filesystem::path& path);
  // Parses bytes owned by the caller, which must outlive the File (tests).
  static std::shared_ptr<const File> parse(const std::byte* data, size_t size, const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t size() const { return size_; }
  uint64_t data_offset() const { return data_offset_; }  // absolute offset of the data section

  // Metadata in file order.
  const std::vector<std::pair<std::string_view, Value>>& metadata() const { return metadata_; }
  const Value* find(std::string_view key) const;
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;

  // Typed access. The getters throw specd::Error(kModelFormat) naming the file and key when the
  // key holds another type or a value out of range; the `_or` forms return `fallback` for a
  // missing key. Integers of any GGUF integer type are accepted where they fit.
  std::optional<int64_t> integer(std::string_view key) const;
  int64_t require_integer(std::string_view key) const;
  std::optional<double> real(std::string_view key) const;  // f32 or f64
  std::optional<bool> boolean(std::string_view key) const;
  std::optional<std::string_view> string(std::string_view key) const;
  std::string_view require_string(std::string_view key) const;

  // Array elements. `v` must be an array of the stated kind (checked; errors name `key`).
  std::string_view string_at(const Value& v, uint64_t i, std::string_view key) const;
  int64_t integer_at(const Value& v, uint64_t i, std::string_view key) const;
  double real_at(const Value& v, uint64_t i, std::string_view key) const;
  const Value& array_at(const Value& v, uint64_t i, std::string_view key) const;
  // The array under `key` with elements of `elem` (or any integer type for kInt64, any float
  // type for kFloat64); nullptr when the key is absent.
  const Value* array(std::string_view key, ValueType elem) const;

  // Scalar or string value as text (for `specd inspect`; strings longer than max_len are cut).
  std::string describe(const Value& v, size_t max_len = 60) const;

  // "<file>: <what>" as specd::Error(code).
  [[noreturn]] void fail(std::string_view what, bool unsupported = false) const;

 private:
  friend class Parser;
  File() = default;

  std::filesystem::path path_;
  std::optional<MappedFile> mapping_;
  const std::byte* bytes_ = nullptr;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string_view, Value>> metadata_;
  std::map<std::string_view, size_t, std::less<>> by_key_;
  std::vector<Value> values_;  // elements of nested arrays
  // Elements of string arrays: the file offset of each one's 8-byte length (checked when read),
  // 8 bytes an element instead of a 16-byte view (a million merges are 8 MB here).
  std::vector<uint64_t> strings_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string_view, size_t, std::less<>> by_name_;
};

// True when `path` is a regular file that starts with the GGUF magic ("GGUF"): the format is
// recognised by content, never by the file name.
bool is_gguf_file(const std::filesystem::path& path);

}  // namespace specd::model::gguf
