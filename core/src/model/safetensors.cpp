#include "model/safetensors.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>

#include "common/untrusted.hpp"
#include "specd/error.hpp"

namespace specd::model {

// ---- dtypes ---------------------------------------------------------------------------------

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kQ3_K:
    case DType::kQ2_K:
      break;
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

// One header entry as written, before validation.
struct RawEntry {
  std::string name;
  std::string dtype;
  std::vector<uint64_t> shape;
  std::vector<uint64_t> offsets;
  bool has_dtype = false, has_shape = false, has_offsets = false;
  bool shape_ok = true, offsets_ok = true;  // only non-negative integers seen
};

// Most dimensions a tensor may have (PyTorch's own limit is 64; real checkpoints use <= 4).
constexpr size_t kMaxDims = 16;

// Streams the header into RawEntry records without building a JSON document, so memory stays
// proportional to the number of tensors whatever the header holds: deep or unknown subtrees
// (in "__metadata__" or unknown entry keys) are skipped, not stored.
class HeaderReader final : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit HeaderReader(const std::filesystem::path& file) : file_(file) {}
  std::vector<RawEntry>& entries() { return entries_; }

  bool null() override { return scalar("null"); }
  bool boolean(bool) override { return scalar("boolean"); }
  bool number_integer(number_integer_t v) override {
    return v >= 0 ? number(static_cast<uint64_t>(v)) : scalar("integer");
  }
  bool number_unsigned(number_unsigned_t v) override { return number(v); }
  bool number_float(number_float_t, const string_t&) override { return scalar("number"); }
  bool binary(binary_t&) override { return scalar("binary"); }
  bool string(string_t& v) override {
    if (skip_ == 0 && depth_ == 2 && field_ == Field::kDtype) {
      entries_.back().dtype = std::move(v);
      entries_.back().has_dtype = true;
      return true;
    }
    return scalar("string");
  }
  bool start_object(std::size_t) override {
    if (skip_ > 0 || (depth_ == 2 && field_ == Field::kOther)) return enter_skip();
    if (depth_ == 0 || depth_ == 1) {
      ++depth_;
      return true;
    }
    fail(ErrorCode::kModelFormat, file_, where() + ": unexpected object");
  }
  bool start_array(std::size_t) override {
    if (skip_ > 0 || (depth_ == 2 && field_ == Field::kOther)) return enter_skip();
    if (depth_ == 2 && (field_ == Field::kShape || field_ == Field::kOffsets)) {
      RawEntry& e = entries_.back();
      (field_ == Field::kShape ? e.has_shape : e.has_offsets) = true;
      ++depth_;
      return true;
    }
    if (depth_ == 0) fail(ErrorCode::kModelFormat, file_, "safetensors header is not a JSON object");
    fail(ErrorCode::kModelFormat, file_, where() + ": unexpected array");
  }
  bool key(string_t& k) override {
    if (skip_ > 0) return true;
    if (depth_ == 1) {
      metadata_ = k == "__metadata__";
      if (!metadata_) {
        entries_.push_back({});
        entries_.back().name = std::move(k);
      }
      field_ = Field::kOther;
      return true;
    }
    field_ = metadata_             ? Field::kOther
             : k == "dtype"        ? Field::kDtype
             : k == "shape"        ? Field::kShape
             : k == "data_offsets" ? Field::kOffsets
                                   : Field::kOther;
    if (field_ != Field::kOther) {
      const RawEntry& e = entries_.back();
      if (field_ == Field::kDtype ? e.has_dtype : field_ == Field::kShape ? e.has_shape : e.has_offsets) {
        fail(ErrorCode::kModelFormat, file_, where() + ": \"" + k + "\" appears twice");
      }
    }
    return true;
  }
  bool end_object() override { return leave(); }
  bool end_array() override { return leave(); }
  bool parse_error(std::size_t byte, const std::string&, const nlohmann::detail::exception& e) override {
    std::string what = e.what();
    if (const size_t p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    fail(ErrorCode::kModelFormat, file_,
         "invalid safetensors header JSON at byte " + std::to_string(byte) + ": " + clip(what, 160));
  }

 private:
  enum class Field { kOther, kDtype, kShape, kOffsets };

  std::string where() const {
    if (metadata_) return "\"__metadata__\"";
    return entries_.empty() ? std::string("header") : "tensor '" + clip(entries_.back().name) + "'";
  }
  bool enter_skip() {
    if (++skip_ + depth_ > kMaxJsonDepth) {
      fail(ErrorCode::kModelFormat, file_,
           "safetensors header nests deeper than " + std::to_string(kMaxJsonDepth) + " levels in " + where());
    }
    return true;
  }
  bool leave() {
    if (skip_ > 0) {
      --skip_;
      return true;
    }
    --depth_;
    return true;
  }
  bool number(uint64_t v) {
    if (skip_ == 0 && depth_ == 3) {
      RawEntry& e = entries_.back();
      std::vector<uint64_t>& dims = field_ == Field::kShape ? e.shape : e.offsets;
      if (field_ == Field::kShape && dims.size() == kMaxDims) {
        fail(ErrorCode::kModelFormat, file_,
             where() + ": \"shape\" has more than " + std::to_string(kMaxDims) + " dimensions");
      }
      if (field_ == Field::kOffsets && dims.size() == 2)
        e.offsets_ok = false;
      else
        dims.push_back(v);
      return true;
    }
    return scalar("integer");
  }
  // A value that is not what its place needs (or any value in a skipped subtree).
  bool scalar(const char* type) {
    if (skip_ > 0 || (depth_ == 2 && field_ == Field::kOther)) return true;
    if (depth_ == 1) {
      fail(ErrorCode::kModelFormat, file_,
           where() + (metadata_ ? " is not an object" : ": header entry is not an object") + " (found " + type + ")");
    }
    if (depth_ == 3) {
      (field_ == Field::kShape ? entries_.back().shape_ok : entries_.back().offsets_ok) = false;
      return true;
    }
    if (depth_ == 2 && field_ == Field::kDtype) return true;  // has_dtype stays false
    if (depth_ == 0) fail(ErrorCode::kModelFormat, file_, "safetensors header is not a JSON object");
    fail(ErrorCode::kModelFormat, file_, where() + ": header entry is not an object (found " + type + ")");
  }

  const std::filesystem::path& file_;
  std::vector<RawEntry> entries_;
  int depth_ = 0;  // 1 = in the top object, 2 = in an entry, 3 = in its shape / data_offsets
  int skip_ = 0;   // depth inside a subtree that is skipped
  Field field_ = Field::kOther;
  bool metadata_ = false;
};

struct Entry {
  TensorView view;
  uint64_t begin = 0;
  uint64_t end = 0;
};

Entry parse_entry(RawEntry& raw, uint64_t data_size, const std::filesystem::path& file) {
  const std::string where = "tensor '" + clip(raw.name) + "'";
  if (!raw.has_dtype) fail(ErrorCode::kModelFormat, file, where + ": missing or non-string \"dtype\"");
  if (!raw.has_shape) fail(ErrorCode::kModelFormat, file, where + ": missing or non-array \"shape\"");
  if (!raw.shape_ok) fail(ErrorCode::kModelFormat, file, where + ": \"shape\" must hold non-negative integers");
  if (!raw.has_offsets || !raw.offsets_ok || raw.offsets.size() != 2) {
    fail(ErrorCode::kModelFormat, file, where + ": \"data_offsets\" must be two non-negative integers");
  }

  Entry entry;
  entry.view.name = std::move(raw.name);
  entry.view.file = file;
  const std::string& dtype = raw.dtype;
  if (dtype == "F32") {
    entry.view.dtype = DType::kF32;
  } else if (dtype == "F16") {
    entry.view.dtype = DType::kF16;
  } else if (dtype == "BF16") {
    entry.view.dtype = DType::kBF16;
  } else if (dtype == "I64") {
    entry.view.integer = TensorView::Integer::kI64;
  } else if (dtype == "BOOL") {
    entry.view.integer = TensorView::Integer::kBool;
  } else {
    fail(
        ErrorCode::kUnsupported, file,
        where + " has dtype " + clip(dtype, 16) + ", which specd does not read (supported: F32, F16, BF16, I64, BOOL)");
  }

  uint64_t numel = 1;
  for (const uint64_t d : raw.shape) {
    if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        (d != 0 && numel > std::numeric_limits<uint64_t>::max() / 8 / d)) {
      fail(ErrorCode::kModelFormat, file,
           where + ": \"shape\" " + shape_text({raw.shape.begin(), raw.shape.end()}) + " has too many elements");
    }
    numel *= d;
    entry.view.shape.push_back(static_cast<int64_t>(d));
  }

  entry.begin = raw.offsets[0];
  entry.end = raw.offsets[1];
  const std::string offsets = offsets_text(entry.begin, entry.end);
  if (entry.begin > entry.end) {
    fail(ErrorCode::kModelFormat, file, where + ": data_offsets " + offsets + " are reversed");
  }
  if (entry.end > data_size) {
    fail(ErrorCode::kModelFormat, file,
         where + ": data_offsets " + offsets + " run past the end of the file (data section holds " +
             std::to_string(data_size) + " bytes; the file is truncated or corrupt)");
  }
  const uint64_t element = entry.view.integer == TensorView::Integer::kI64    ? 8
                           : entry.view.integer == TensorView::Integer::kBool ? 1
                                                                              : dtype_size(entry.view.dtype);
  const uint64_t expected = numel * element;
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
  HeaderReader reader(file);
  nlohmann::json::sax_parse(header_begin, header_begin + header_len, &reader);
  std::vector<RawEntry>& raw = reader.entries();
  std::sort(raw.begin(), raw.end(), [](const RawEntry& a, const RawEntry& b) { return a.name < b.name; });
  for (size_t i = 1; i < raw.size(); ++i) {
    if (raw[i].name == raw[i - 1].name)
      fail(ErrorCode::kModelFormat, file, "tensor '" + clip(raw[i].name) + "' appears twice");
  }

  const uint64_t data_size = size - 8 - header_len;
  const std::byte* data_begin = data + 8 + header_len;
  std::vector<Entry> entries;
  entries.reserve(raw.size());
  for (RawEntry& r : raw) entries.push_back(parse_entry(r, data_size, file));

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
           "tensors '" + clip(prev.view.name) + "' " + offsets_text(prev.begin, prev.end) + " and '" +
               clip(next.view.name) + "' " + offsets_text(next.begin, next.end) + " overlap");
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
