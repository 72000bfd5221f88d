#include "gguf_writer.hpp"

#include <unistd.h>

#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "model/gguf.hpp"
#include "specd/error.hpp"

static_assert(std::endian::native == std::endian::little, "GGUF is written little-endian by copying bytes");

namespace specd::gguf {

namespace {

template <typename T>
void append_raw(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

void append_string(std::string& out, std::string_view text) {
  append_raw<uint64_t>(out, text.size());
  out.append(text);
}

template <typename T>
void put(std::ostream& out, T value) {
  out.write(reinterpret_cast<const char*>(&value), sizeof(T));
}

void put_string(std::ostream& out, std::string_view text) {
  put<uint64_t>(out, text.size());
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
}

uint64_t align_up(uint64_t offset, uint32_t alignment) {
  return (offset + alignment - 1) / alignment * alignment;
}

void put_padding(std::ostream& out, uint64_t bytes) {
  static constexpr char kZeros[64] = {};
  while (bytes > 0) {
    const uint64_t n = bytes < sizeof(kZeros) ? bytes : sizeof(kZeros);
    out.write(kZeros, static_cast<std::streamsize>(n));
    bytes -= n;
  }
}

[[noreturn]] void io_error(const std::filesystem::path& file, const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument, file.string() + ": " + what + ": " + std::strerror(errno));
}

}  // namespace

std::string_view tensor_type_name(TensorType type) {
  switch (type) {
    case TensorType::kF32:
      return "f32";
    case TensorType::kF16:
      return "f16";
    case TensorType::kBF16:
      return "bf16";
    case TensorType::kQ8_0:
      return "q8_0";
    case TensorType::kQ4_0:
      return "q4_0";
    case TensorType::kQ2_K:
      return "q2_k";
    case TensorType::kQ3_K:
      return "q3_k";
    case TensorType::kQ4_K:
      return "q4_k";
    case TensorType::kQ5_K:
      return "q5_k";
    case TensorType::kQ6_K:
      return "q6_k";
  }
  return "?";
}

uint64_t tensor_bytes(TensorType type, uint64_t numel) {
  const model::gguf::TypeInfo& info = model::gguf::type_info(static_cast<uint32_t>(type));
  if (info.block == 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "GGUF tensor type id " + std::to_string(static_cast<uint32_t>(type)) + " has no known block size");
  }
  return numel / info.block * info.bytes;
}

TensorType parse_tensor_type(std::string_view text) {
  for (TensorType type :
       {TensorType::kF32, TensorType::kF16, TensorType::kBF16, TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ2_K,
        TensorType::kQ3_K, TensorType::kQ4_K, TensorType::kQ5_K, TensorType::kQ6_K}) {
    if (text == tensor_type_name(type)) return type;
  }
  throw Error(ErrorCode::kInvalidArgument,
              "unknown GGUF tensor type '" + std::string(text) +
                  "' (supported: f32, f16, bf16, q8_0, q4_0, q2_k, q3_k, q4_k, q5_k, q6_k)");
}

Writer::Writer(uint32_t alignment) : alignment_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    throw Error(ErrorCode::kInvalidArgument, "GGUF alignment must be a power of two, got " + std::to_string(alignment));
  }
  set_u32("general.alignment", alignment);
}

void Writer::begin_value(std::string_view key, ValueType type) {
  for (const std::string& k : keys_) {
    if (k == key) throw Error(ErrorCode::kInvalidArgument, "GGUF metadata key '" + std::string(key) + "' set twice");
  }
  keys_.emplace_back(key);
  append_string(metadata_, key);
  append_raw(metadata_, static_cast<uint32_t>(type));
}

void Writer::begin_array(std::string_view key, ValueType element_type, uint64_t count) {
  begin_value(key, ValueType::kArray);
  append_raw(metadata_, static_cast<uint32_t>(element_type));
  append_raw<uint64_t>(metadata_, count);
}

void Writer::set_u32(std::string_view key, uint32_t value) {
  begin_value(key, ValueType::kUint32);
  append_raw(metadata_, value);
}

void Writer::set_f32(std::string_view key, float value) {
  begin_value(key, ValueType::kFloat32);
  append_raw(metadata_, value);
}

void Writer::set_bool(std::string_view key, bool value) {
  begin_value(key, ValueType::kBool);
  append_raw<uint8_t>(metadata_, value ? 1 : 0);
}

void Writer::set_string(std::string_view key, std::string_view value) {
  begin_value(key, ValueType::kString);
  append_string(metadata_, value);
}

void Writer::set_strings(std::string_view key, const std::vector<std::string>& values) {
  begin_array(key, ValueType::kString, values.size());
  for (const std::string& v : values) append_string(metadata_, v);
}

void Writer::set_f32s(std::string_view key, const std::vector<float>& values) {
  begin_array(key, ValueType::kFloat32, values.size());
  metadata_.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

void Writer::set_i32s(std::string_view key, const std::vector<int32_t>& values) {
  begin_array(key, ValueType::kInt32, values.size());
  metadata_.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int32_t));
}

void Writer::add_tensor(std::string name, std::vector<uint64_t> ne, TensorType type,
                        std::function<void(std::ostream&)> write_data) {
  for (const Tensor& t : tensors_) {
    if (t.name == name) throw Error(ErrorCode::kInvalidArgument, "GGUF tensor '" + name + "' added twice");
  }
  if (ne.empty() || ne.size() > 4) {
    throw Error(ErrorCode::kInvalidArgument,
                "GGUF tensor '" + name + "' has " + std::to_string(ne.size()) + " dimensions (1 to 4 allowed)");
  }
  uint64_t numel = 1;
  for (uint64_t d : ne) numel *= d;
  const uint32_t block = model::gguf::type_info(static_cast<uint32_t>(type)).block;
  if (block == 0 || ne[0] % block != 0) {
    throw Error(ErrorCode::kInvalidArgument, "GGUF tensor '" + name + "': ne[0] = " + std::to_string(ne[0]) +
                                                 " is not a whole number of " +
                                                 model::gguf::type_name(static_cast<uint32_t>(type)) + " blocks");
  }
  Tensor t{std::move(name), std::move(ne), type, tensor_bytes(type, numel), next_offset_, std::move(write_data)};
  next_offset_ = align_up(t.offset + t.nbytes, alignment_);
  tensors_.push_back(std::move(t));
}

void Writer::write(const std::filesystem::path& file) const {
  // A name of this process and call: tests running in parallel may write the same file, and
  // each must rename its own complete copy.
  static std::atomic<uint64_t> calls{0};
  const std::filesystem::path tmp =
      file.string() + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(calls.fetch_add(1));
  try {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) io_error(tmp, "cannot create");
    out.write("GGUF", 4);
    put<uint32_t>(out, kVersion);
    put<uint64_t>(out, tensors_.size());
    put<uint64_t>(out, keys_.size());
    out.write(metadata_.data(), static_cast<std::streamsize>(metadata_.size()));
    for (const Tensor& t : tensors_) {
      put_string(out, t.name);
      put<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
      for (uint64_t d : t.ne) put<uint64_t>(out, d);
      put<uint32_t>(out, static_cast<uint32_t>(t.type));
      put<uint64_t>(out, t.offset);
    }
    const auto header_end = static_cast<uint64_t>(out.tellp());
    put_padding(out, align_up(header_end, alignment_) - header_end);
    const auto data_start = static_cast<uint64_t>(out.tellp());
    for (const Tensor& t : tensors_) {
      t.write_data(out);
      if (!out) io_error(tmp, "cannot write tensor " + t.name);
      const uint64_t end = static_cast<uint64_t>(out.tellp()) - data_start;
      if (end != t.offset + t.nbytes) {
        throw Error(ErrorCode::kInternal, "GGUF tensor '" + t.name + "': the data writer wrote " +
                                              std::to_string(end - t.offset) + " bytes, expected " +
                                              std::to_string(t.nbytes));
      }
      put_padding(out, align_up(end, alignment_) - end);
    }
    out.close();
    if (!out) io_error(tmp, "cannot write");
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, file, ec);
  if (ec)
    throw Error(ErrorCode::kInvalidArgument, file.string() + ": cannot rename " + tmp.string() + ": " + ec.message());
}

}  // namespace specd::gguf
