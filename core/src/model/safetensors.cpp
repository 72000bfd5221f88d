#include "model/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "specd/error.hpp"

namespace specd::model {

// ---- dtypes ---------------------------------------------------------------------------------

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kF16:
    case DType::kBF16: return 2;
    case DType::kQ8_0:
    case DType::kQ4_0: break;
  }
  throw Error(ErrorCode::kInternal, "dtype_size: " + std::string(dtype_name(dtype)) + " has no element size");
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// ---- safetensors ----------------------------------------------------------------------------

namespace {

using nlohmann::json;

[[noreturn]] void fail(ErrorCode code, const std::filesystem::path& file, const std::string& what) {
  throw Error(code, file.string() + ": " + what);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string offsets_text(uint64_t begin, uint64_t end) {
  // Appended piecewise: g++ 12 warns (-Wrestrict) on "[" + std::to_string(...).
  std::string text = "[";
  text += std::to_string(begin);
  text += ", ";
  text += std::to_string(end);
  text += "]";
  return text;
}

struct Entry {
  TensorView view;
  uint64_t begin = 0;
  uint64_t end = 0;
};

Entry parse_entry(const std::string& name, const json& value, uint64_t data_size, const std::filesystem::path& file) {
  const std::string where = "tensor '" + name + "'";
  if (!value.is_object()) fail(ErrorCode::kModelFormat, file, where + ": header entry is not an object");
  const auto dtype_it = value.find("dtype");
  const auto shape_it = value.find("shape");
  const auto offsets_it = value.find("data_offsets");
  if (dtype_it == value.end() || !dtype_it->is_string()) {
    fail(ErrorCode::kModelFormat, file, where + ": missing or non-string \"dtype\"");
  }
  if (shape_it == value.end() || !shape_it->is_array()) {
    fail(ErrorCode::kModelFormat, file, where + ": missing or non-array \"shape\"");
  }
  if (offsets_it == value.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
      !(*offsets_it)[0].is_number_unsigned() || !(*offsets_it)[1].is_number_unsigned()) {
    fail(ErrorCode::kModelFormat, file, where + ": \"data_offsets\" must be two non-negative integers");
  }

  Entry entry;
  entry.view.name = name;
  entry.view.file = file;
  const std::string dtype = dtype_it->get<std::string>();
  if (dtype == "F32") {
    entry.view.dtype = DType::kF32;
  } else if (dtype == "F16") {
    entry.view.dtype = DType::kF16;
  } else if (dtype == "BF16") {
    entry.view.dtype = DType::kBF16;
  } else {
    fail(ErrorCode::kUnsupported, file,
         where + " has dtype " + dtype + ", which specd does not read (supported: F32, F16, BF16)");
  }

  uint64_t numel = 1;
  for (const json& dim : *shape_it) {
    if (!dim.is_number_unsigned()) {
      fail(ErrorCode::kModelFormat, file, where + ": shape " + shape_it->dump() + " must hold non-negative integers");
    }
    const uint64_t d = dim.get<uint64_t>();
    if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        (d != 0 && numel > std::numeric_limits<uint64_t>::max() / 8 / d)) {
      fail(ErrorCode::kModelFormat, file, where + ": shape " + shape_it->dump() + " is too large");
    }
    numel *= d;
    entry.view.shape.push_back(static_cast<int64_t>(d));
  }

  entry.begin = (*offsets_it)[0].get<uint64_t>();
  entry.end = (*offsets_it)[1].get<uint64_t>();
  const std::string offsets = offsets_text(entry.begin, entry.end);
  if (entry.begin > entry.end) {
    fail(ErrorCode::kModelFormat, file, where + ": data_offsets " + offsets + " are reversed");
  }
  if (entry.end > data_size) {
    fail(ErrorCode::kModelFormat, file,
         where + ": data_offsets " + offsets + " run past the end of the file (data section holds " +
             std::to_string(data_size) + " bytes; the file is truncated or corrupt)");
  }
  const uint64_t expected = numel * dtype_size(entry.view.dtype);
  if (entry.end - entry.begin != expected) {
    fail(ErrorCode::kModelFormat, file,
         where + ": data_offsets " + offsets + " span " + std::to_string(entry.end - entry.begin) +
             " bytes but dtype " + dtype + " x shape " + shape_text(entry.view.shape) + " needs " +
             std::to_string(expected));
  }
  entry.view.nbytes = static_cast<size_t>(expected);
  return entry;
}

}  // namespace

std::vector<TensorView> parse_safetensors(const std::byte* data, size_t size, const std::filesystem::path& file) {
  if (size < 8) {
    fail(ErrorCode::kModelFormat, file,
         "truncated safetensors file: " + std::to_string(size) + " bytes, shorter than the 8-byte header length");
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | std::to_integer<uint64_t>(data[i]);
  if (header_len > size - 8) {
    fail(ErrorCode::kModelFormat, file,
         "safetensors header length " + std::to_string(header_len) + " runs past the end of the file (" +
             std::to_string(size) + " bytes)");
  }
  if (header_len > kMaxSafetensorsHeaderBytes) {
    fail(ErrorCode::kModelFormat, file,
         "safetensors header length " + std::to_string(header_len) + " exceeds the " +
             std::to_string(kMaxSafetensorsHeaderBytes) + "-byte limit");
  }

  const char* header_begin = reinterpret_cast<const char*>(data + 8);
  json header;
  try {
    header = json::parse(header_begin, header_begin + header_len);
  } catch (const json::exception& e) {
    fail(ErrorCode::kModelFormat, file, std::string("invalid safetensors header JSON: ") + e.what());
  }
  if (!header.is_object()) fail(ErrorCode::kModelFormat, file, "safetensors header is not a JSON object");

  const uint64_t data_size = size - 8 - header_len;
  const std::byte* data_begin = data + 8 + header_len;
  std::vector<Entry> entries;
  entries.reserve(header.size());
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) fail(ErrorCode::kModelFormat, file, "\"__metadata__\" is not an object");
      continue;
    }
    entries.push_back(parse_entry(name, value, data_size, file));
  }

  // Overlap check over the non-empty extents, in file order.
  std::vector<const Entry*> by_offset;
  for (const Entry& e : entries) {
    if (e.end > e.begin) by_offset.push_back(&e);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const Entry& prev = *by_offset[i - 1];
    const Entry& next = *by_offset[i];
    if (next.begin < prev.end) {
      fail(ErrorCode::kModelFormat, file,
           "tensors '" + prev.view.name + "' " + offsets_text(prev.begin, prev.end) + " and '" + next.view.name + "' " +
               offsets_text(next.begin, next.end) + " overlap");
    }
  }

  std::vector<TensorView> views;
  views.reserve(entries.size());
  for (Entry& e : entries) {
    e.view.data = data_begin + e.begin;
    views.push_back(std::move(e.view));
  }
  return views;
}

}  // namespace specd::model
