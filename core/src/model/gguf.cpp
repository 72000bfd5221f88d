#include "model/gguf.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include "specd/error.hpp"

static_assert(std::endian::native == std::endian::little, "GGUF values are read by copying little-endian bytes");

namespace specd::model::gguf {

namespace {

constexpr uint32_t kMinVersion = 2;
constexpr uint32_t kMaxVersion = 3;
// Smallest encodings, used to bound counts by the bytes that remain before allocating.
constexpr uint64_t kMinMetadataEntry = 8 + 4 + 1;  // empty key, type, a 1-byte value
constexpr uint64_t kMinTensorInfo = 8 + 4 + 8 + 4 + 8;
constexpr uint64_t kMinNestedArray = 4 + 8;
constexpr uint64_t kMaxKeyBytes = 65535;  // keys and tensor names are identifiers, not payload

// ggml's type table (ggml.h, ggml-common.h): name, elements per block, bytes per block.
constexpr std::array<TypeInfo, 43> kTypes = {{
    {"F32", 1, 4},      {"F16", 1, 2},        {"Q4_0", 32, 18},     {"Q4_1", 32, 20},     {"Q4_2", 0, 0},
    {"Q4_3", 0, 0},     {"Q5_0", 32, 22},     {"Q5_1", 32, 24},     {"Q8_0", 32, 34},     {"Q8_1", 32, 36},
    {"Q2_K", 256, 84},  {"Q3_K", 256, 110},   {"Q4_K", 256, 144},   {"Q5_K", 256, 176},   {"Q6_K", 256, 210},
    {"Q8_K", 256, 292}, {"IQ2_XXS", 256, 66}, {"IQ2_XS", 256, 74},  {"IQ3_XXS", 256, 98}, {"IQ1_S", 256, 50},
    {"IQ4_NL", 32, 18}, {"IQ3_S", 256, 110},  {"IQ2_S", 256, 82},   {"IQ4_XS", 256, 136}, {"I8", 1, 1},
    {"I16", 1, 2},      {"I32", 1, 4},        {"I64", 1, 8},        {"F64", 1, 8},        {"IQ1_M", 256, 56},
    {"BF16", 1, 2},     {"Q4_0_4_4", 0, 0},   {"Q4_0_4_8", 0, 0},   {"Q4_0_8_8", 0, 0},   {"TQ1_0", 256, 54},
    {"TQ2_0", 256, 66}, {"IQ4_NL_4_4", 0, 0}, {"IQ4_NL_4_8", 0, 0}, {"IQ4_NL_8_8", 0, 0}, {"MXFP4", 32, 17},
    {"NVFP4", 64, 36},  {"Q1_0", 128, 18},    {"Q2_0", 64, 18},
}};

size_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kBool:
      return 1;
    case ValueType::kUint16:
    case ValueType::kInt16:
      return 2;
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kFloat32:
      return 4;
    case ValueType::kUint64:
    case ValueType::kInt64:
    case ValueType::kFloat64:
      return 8;
    case ValueType::kString:
    case ValueType::kArray:
      return 0;
  }
  return 0;
}

bool known_value_type(uint32_t t) {
  return t <= static_cast<uint32_t>(ValueType::kFloat64);
}

template <typename T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Printable form of an untrusted identifier for messages: control bytes escaped, cut at 80.
std::string shown(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 80)) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  if (s.size() > 80) out += "...";
  return out;
}

uint64_t align_up(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}

}  // namespace

std::string_view value_type_name(ValueType type) noexcept {
  static constexpr std::string_view kNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                                "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = static_cast<uint32_t>(type);
  return i < std::size(kNames) ? kNames[i] : std::string_view("unknown");
}

const TypeInfo& type_info(uint32_t ggml_type) noexcept {
  static constexpr TypeInfo kUnknown{"unknown", 0, 0};
  return ggml_type < kTypes.size() ? kTypes[ggml_type] : kUnknown;
}

std::string type_name(uint32_t ggml_type) {
  if (ggml_type < kTypes.size()) return std::string(kTypes[ggml_type].name);
  return "type " + std::to_string(ggml_type);
}

bool Value::is_integer() const {
  switch (type) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kUint16:
    case ValueType::kInt16:
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kUint64:
    case ValueType::kInt64:
      return true;
    default:
      return false;
  }
}

// ---- parsing ---------------------------------------------------------------------------------

class Parser {
 public:
  explicit Parser(File& f) : f_(f) {}

  void run() {
    header();
    for (uint64_t i = 0; i < kv_count_; ++i) metadata_entry(i);
    alignment();
    for (uint64_t i = 0; i < tensor_count_; ++i) tensor_info(i);
    data_section();
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { f_.fail(what); }

  // `n` more bytes for `what`, or an error naming the offset and what was being read.
  const std::byte* take(uint64_t n, const std::string& what) {
    if (n > f_.size_ - pos_) {
      fail(what + " at offset " + std::to_string(pos_) + " needs " + std::to_string(n) +
           " bytes but the file ends at " + std::to_string(f_.size_) + " (truncated or corrupt)");
    }
    const std::byte* p = f_.bytes_ + pos_;
    pos_ += n;
    return p;
  }
  uint64_t remaining() const { return f_.size_ - pos_; }
  template <typename T>
  T read(const std::string& what) {
    return load<T>(take(sizeof(T), what));
  }

  std::string_view string(const std::string& what, uint64_t max_len = std::numeric_limits<uint64_t>::max()) {
    const auto len = read<uint64_t>(what + " length");
    if (len > max_len)
      fail(what + " length " + std::to_string(len) + " exceeds the limit of " + std::to_string(max_len));
    if (len > remaining()) {
      fail(what + " length " + std::to_string(len) + " at offset " + std::to_string(pos_ - 8) +
           " runs past the end of the file (" + std::to_string(f_.size_) + " bytes)");
    }
    return {reinterpret_cast<const char*>(take(len, what)), static_cast<size_t>(len)};
  }

  void header() {
    const std::byte* magic = take(4, "magic");
    if (std::memcmp(magic, "GGUF", 4) != 0) fail("not a GGUF file (the first 4 bytes are not \"GGUF\")");
    const auto version = read<uint32_t>("version");
    if (version != 0 && (version & 0xFFFFu) == 0) {
      fail("big-endian GGUF (the version field reads " + std::to_string(version) +
           " little-endian); specd reads little-endian GGUF only");
    }
    if (version < kMinVersion || version > kMaxVersion) {
      fail("GGUF version " + std::to_string(version) + " is not supported (specd reads versions 2 and 3)");
    }
    f_.version_ = version;
    tensor_count_ = read<uint64_t>("tensor count");
    kv_count_ = read<uint64_t>("metadata count");
    if (kv_count_ > remaining() / kMinMetadataEntry) {
      fail("metadata count " + std::to_string(kv_count_) + " cannot fit in the " + std::to_string(remaining()) +
           " bytes that follow the header");
    }
    if (tensor_count_ > remaining() / kMinTensorInfo) {
      fail("tensor count " + std::to_string(tensor_count_) + " cannot fit in the " + std::to_string(remaining()) +
           " bytes that follow the header");
    }
    f_.metadata_.reserve(static_cast<size_t>(kv_count_));
    f_.tensors_.reserve(static_cast<size_t>(tensor_count_));
  }

  void metadata_entry(uint64_t index) {
    const std::string entry = "metadata entry " + std::to_string(index);
    const std::string_view key = string(entry + " key", kMaxKeyBytes);
    const std::string where = "metadata key '" + shown(key) + "'";
    const auto type = read<uint32_t>(where + " value type");
    if (!known_value_type(type)) fail(where + " has unknown value type " + std::to_string(type));
    Value v;
    v.type = static_cast<ValueType>(type);
    value(v, where);
    if (!f_.by_key_.emplace(key, f_.metadata_.size()).second) fail(where + " appears twice");
    f_.metadata_.emplace_back(key, v);
  }

  // Reads one value of v.type. Arrays of arrays are read iteratively (explicit stack).
  void value(Value& v, const std::string& where) {
    if (v.type == ValueType::kString) {
      const std::string_view s = string(where + " string");
      v.raw = reinterpret_cast<const std::byte*>(s.data());
      v.count = s.size();
      return;
    }
    if (v.type != ValueType::kArray) {
      v.raw = take(scalar_size(v.type), where + " value");
      return;
    }
    struct Frame {
      size_t first;  // index in values_ of the first child
      uint64_t count;
      uint64_t next;
    };
    std::vector<Frame> stack;
    if (array_header(v, where, 1)) stack.push_back({v.first, v.count, 0});
    while (!stack.empty()) {
      Frame& top = stack.back();
      if (top.next == top.count) {
        stack.pop_back();
        continue;
      }
      const size_t child = top.first + top.next++;
      reserved_ -= kMinNestedArray;  // this slot's bytes are being read now
      const auto depth = static_cast<uint32_t>(stack.size() + 1);
      Value nested;
      nested.type = ValueType::kArray;
      const bool has_children = array_header(nested, where, depth);
      f_.values_[child] = nested;  // by index: array_header may have grown values_
      if (has_children) stack.push_back({nested.first, nested.count, 0});
    }
  }

  // Element type and count of an array at `depth`, then its elements unless they are arrays
  // (returns true: the caller reads those, `count` slots reserved from v.first in values_).
  bool array_header(Value& v, const std::string& where, uint32_t depth) {
    if (depth > kMaxArrayDepth)
      fail(where + ": arrays nested deeper than " + std::to_string(kMaxArrayDepth) + " levels");
    const auto elem = read<uint32_t>(where + " array element type");
    if (!known_value_type(elem)) fail(where + " is an array of unknown value type " + std::to_string(elem));
    v.elem_type = static_cast<ValueType>(elem);
    v.count = read<uint64_t>(where + " array length");
    const size_t size = scalar_size(v.elem_type);
    const uint64_t min_elem = size > 0 ? size : v.elem_type == ValueType::kString ? 8 : kMinNestedArray;
    // The bytes left, less what the nested arrays already announced but not yet read need at
    // least: so all the slots reserved in values_ together stay bounded by the file's size.
    const uint64_t available = remaining() > reserved_ ? remaining() - reserved_ : 0;
    if (v.count > available / min_elem) {
      fail(where + " array length " + std::to_string(v.count) + " (" + std::string(value_type_name(v.elem_type)) +
           ") cannot fit in the " + std::to_string(available) + " bytes left in the file" +
           (reserved_ > 0 ? " (less the " + std::to_string(reserved_) + " its enclosing arrays still need)" : ""));
    }
    if (size > 0) {
      v.raw = take(v.count * size, where + " array");
      return false;
    }
    if (v.elem_type == ValueType::kString) {
      v.first = f_.strings_.size();
      f_.strings_.reserve(f_.strings_.size() + static_cast<size_t>(v.count));
      for (uint64_t i = 0; i < v.count; ++i) {
        f_.strings_.push_back(pos_);
        string(where + "[" + std::to_string(i) + "]");
      }
      return false;
    }
    v.first = f_.values_.size();
    f_.values_.resize(f_.values_.size() + static_cast<size_t>(v.count));
    reserved_ += v.count * kMinNestedArray;
    return v.count > 0;
  }

  void alignment() {
    const Value* a = f_.find("general.alignment");
    if (a == nullptr) return;
    if (!a->is_integer()) fail("general.alignment must be an integer, got " + std::string(value_type_name(a->type)));
    const int64_t align = f_.require_integer("general.alignment");
    if (align <= 0 || align > (int64_t{1} << 30) || (align & (align - 1)) != 0) {
      fail("general.alignment " + std::to_string(align) + " is not a power of two between 1 and 2^30");
    }
    f_.alignment_ = static_cast<uint32_t>(align);
  }

  void tensor_info(uint64_t index) {
    TensorInfo t;
    t.name = string("tensor info " + std::to_string(index) + " name", kMaxKeyBytes);
    const std::string where = "tensor '" + shown(t.name) + "'";
    if (t.name.empty()) fail("tensor info " + std::to_string(index) + " has an empty name");
    t.n_dims = read<uint32_t>(where + " n_dims");
    if (t.n_dims == 0 || t.n_dims > kMaxDims) {
      fail(where + " has " + std::to_string(t.n_dims) + " dimensions (1 to " + std::to_string(kMaxDims) + " allowed)");
    }
    uint64_t numel = 1;
    for (uint32_t d = 0; d < t.n_dims; ++d) {
      t.ne[d] = read<uint64_t>(where + " ne[" + std::to_string(d) + "]");
      if (t.ne[d] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          (t.ne[d] != 0 && numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / t.ne[d])) {
        fail(where + " ne[" + std::to_string(d) + "] = " + std::to_string(t.ne[d]) + ": the element count overflows");
      }
      numel *= t.ne[d];
    }
    t.type = read<uint32_t>(where + " type");
    const TypeInfo& info = type_info(t.type);
    if (info.block == 0)
      fail(where + " has unknown ggml type " + type_name(t.type) + " (id " + std::to_string(t.type) + ")");
    if (t.ne[0] % info.block != 0) {
      fail(where + " has ne[0] = " + std::to_string(t.ne[0]) + ", not a multiple of the " + std::string(info.name) +
           " block of " + std::to_string(info.block));
    }
    if (numel / info.block > std::numeric_limits<uint64_t>::max() / info.bytes) {
      fail(where + " holds " + std::to_string(numel) + " elements: its byte size overflows");
    }
    t.nbytes = numel / info.block * info.bytes;
    t.offset = read<uint64_t>(where + " offset");
    if (!f_.by_name_.emplace(t.name, f_.tensors_.size()).second) fail(where + " appears twice");
    f_.tensors_.push_back(t);
  }

  void data_section() {
    f_.data_offset_ = align_up(pos_, f_.alignment_);
    const uint64_t data_size = f_.data_offset_ <= f_.size_ ? f_.size_ - f_.data_offset_ : 0;
    std::vector<TensorInfo*> by_offset;
    for (TensorInfo& t : f_.tensors_) {
      const std::string where = "tensor '" + shown(t.name) + "'";
      if (t.offset % f_.alignment_ != 0) {
        fail(where + " offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
             std::to_string(f_.alignment_));
      }
      if (t.offset > data_size || t.nbytes > data_size - t.offset) {
        fail(where + " (" + type_name(t.type) + ", " + std::to_string(t.nbytes) + " bytes at data offset " +
             std::to_string(t.offset) + ") runs past the end of the file: the data section holds " +
             std::to_string(data_size) + " bytes (truncated or corrupt)");
      }
      t.data = f_.bytes_ + f_.data_offset_ + t.offset;
      if (t.nbytes > 0) by_offset.push_back(&t);
    }
    std::sort(by_offset.begin(), by_offset.end(),
              [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
      const TensorInfo& prev = *by_offset[i - 1];
      const TensorInfo& next = *by_offset[i];
      if (next.offset < prev.offset + prev.nbytes) {
        fail("tensors '" + shown(prev.name) + "' (data offset " + std::to_string(prev.offset) + ", " +
             std::to_string(prev.nbytes) + " bytes) and '" + shown(next.name) + "' (data offset " +
             std::to_string(next.offset) + ") overlap");
      }
    }
  }

  File& f_;
  uint64_t pos_ = 0;
  uint64_t tensor_count_ = 0;
  uint64_t kv_count_ = 0;
  uint64_t reserved_ = 0;  // bytes still owed by nested arrays announced but not yet read
};

// ---- File ------------------------------------------------------------------------------------

std::shared_ptr<const File> File::parse(const std::byte* data, size_t size, const std::filesystem::path& path) {
  std::shared_ptr<File> f(new File());
  f->path_ = path;
  f->bytes_ = data;
  f->size_ = size;
  Parser(*f).run();
  return f;
}

std::shared_ptr<const File> File::open(const std::filesystem::path& path) {
  MappedFile mapping = MappedFile::open(path);
  const std::byte* data = mapping.data();
  const size_t size = mapping.size();
  std::shared_ptr<File> f(new File());
  f->path_ = path;
  f->mapping_.emplace(std::move(mapping));
  f->bytes_ = data;
  f->size_ = size;
  Parser(*f).run();
  return f;
}

void File::fail(std::string_view what, bool unsupported) const {
  throw Error(unsupported ? ErrorCode::kUnsupported : ErrorCode::kModelFormat,
              path_.string() + ": " + std::string(what));
}

const Value* File::find(std::string_view key) const {
  const auto it = by_key_.find(key);
  return it == by_key_.end() ? nullptr : &metadata_[it->second].second;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

namespace {

// An integer of any GGUF integer type at `p`, as int64 (uint64 above INT64_MAX -> nullopt).
std::optional<int64_t> integer_value(ValueType type, const std::byte* p) {
  switch (type) {
    case ValueType::kUint8:
      return load<uint8_t>(p);
    case ValueType::kInt8:
      return load<int8_t>(p);
    case ValueType::kUint16:
      return load<uint16_t>(p);
    case ValueType::kInt16:
      return load<int16_t>(p);
    case ValueType::kUint32:
      return load<uint32_t>(p);
    case ValueType::kInt32:
      return load<int32_t>(p);
    case ValueType::kInt64:
      return load<int64_t>(p);
    case ValueType::kUint64: {
      const auto u = load<uint64_t>(p);
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
      return static_cast<int64_t>(u);
    }
    default:
      return std::nullopt;
  }
}

}  // namespace

std::optional<int64_t> File::integer(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_integer())
    fail("metadata key '" + shown(key) + "' must be an integer, got " + std::string(value_type_name(v->type)));
  const std::optional<int64_t> i = integer_value(v->type, v->raw);
  if (!i) fail("metadata key '" + shown(key) + "' holds an integer above 2^63");
  return i;
}

int64_t File::require_integer(std::string_view key) const {
  const std::optional<int64_t> i = integer(key);
  if (!i) fail("missing metadata key '" + shown(key) + "'");
  return *i;
}

std::optional<double> File::real(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type == ValueType::kFloat32) return load<float>(v->raw);
  if (v->type == ValueType::kFloat64) return load<double>(v->raw);
  fail("metadata key '" + shown(key) + "' must be a float, got " + std::string(value_type_name(v->type)));
}

std::optional<bool> File::boolean(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != ValueType::kBool)
    fail("metadata key '" + shown(key) + "' must be a bool, got " + std::string(value_type_name(v->type)));
  const auto b = load<uint8_t>(v->raw);
  if (b > 1) fail("metadata key '" + shown(key) + "' holds bool byte " + std::to_string(b) + " (0 or 1 expected)");
  return b == 1;
}

std::optional<std::string_view> File::string(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != ValueType::kString)
    fail("metadata key '" + shown(key) + "' must be a string, got " + std::string(value_type_name(v->type)));
  return std::string_view(reinterpret_cast<const char*>(v->raw), static_cast<size_t>(v->count));
}

std::string_view File::require_string(std::string_view key) const {
  const std::optional<std::string_view> s = string(key);
  if (!s) fail("missing metadata key '" + shown(key) + "'");
  return *s;
}

const Value* File::array(std::string_view key, ValueType elem) const {
  const Value* v = find(key);
  if (v == nullptr) return nullptr;
  Value probe;
  probe.type = v->elem_type;
  const bool ok = v->type == ValueType::kArray && (elem == ValueType::kInt64     ? probe.is_integer()
                                                   : elem == ValueType::kFloat64 ? probe.is_float()
                                                                                 : v->elem_type == elem);
  if (!ok) {
    fail("metadata key '" + shown(key) + "' must be an array of " + std::string(value_type_name(elem)) + ", got " +
         std::string(value_type_name(v->type)) +
         (v->type == ValueType::kArray ? " of " + std::string(value_type_name(v->elem_type)) : std::string()));
  }
  return v;
}

std::string_view File::string_at(const Value& v, uint64_t i, std::string_view key) const {
  if (v.type != ValueType::kArray || v.elem_type != ValueType::kString || i >= v.count)
    fail("metadata key '" + shown(key) + "': no string element " + std::to_string(i));
  const uint64_t at = strings_[v.first + static_cast<size_t>(i)];
  uint64_t len = 0;
  std::memcpy(&len, bytes_ + at, sizeof len);  // little-endian, as the parser read it
  return {reinterpret_cast<const char*>(bytes_ + at + sizeof len), static_cast<size_t>(len)};
}

int64_t File::integer_at(const Value& v, uint64_t i, std::string_view key) const {
  Value probe;
  probe.type = v.elem_type;
  if (v.type != ValueType::kArray || !probe.is_integer() || i >= v.count)
    fail("metadata key '" + shown(key) + "': no integer element " + std::to_string(i));
  const std::optional<int64_t> x = integer_value(v.elem_type, v.raw + i * scalar_size(v.elem_type));
  if (!x) fail("metadata key '" + shown(key) + "'[" + std::to_string(i) + "] holds an integer above 2^63");
  return *x;
}

double File::real_at(const Value& v, uint64_t i, std::string_view key) const {
  if (v.type != ValueType::kArray || i >= v.count)
    fail("metadata key '" + shown(key) + "': no element " + std::to_string(i));
  if (v.elem_type == ValueType::kFloat32) return load<float>(v.raw + i * 4);
  if (v.elem_type == ValueType::kFloat64) return load<double>(v.raw + i * 8);
  fail("metadata key '" + shown(key) + "' is not an array of floats");
}

const Value& File::array_at(const Value& v, uint64_t i, std::string_view key) const {
  if (v.type != ValueType::kArray || v.elem_type != ValueType::kArray || i >= v.count)
    fail("metadata key '" + shown(key) + "': no array element " + std::to_string(i));
  return values_[v.first + static_cast<size_t>(i)];
}

std::string File::describe(const Value& v, size_t max_len) const {
  switch (v.type) {
    case ValueType::kString: {
      const std::string_view s(reinterpret_cast<const char*>(v.raw), static_cast<size_t>(v.count));
      std::string text = shown(s.substr(0, max_len));
      return "\"" + text + (s.size() > max_len ? "...\" (" + std::to_string(s.size()) + " bytes)" : "\"");
    }
    case ValueType::kArray:
      return "[" + std::to_string(v.count) + " x " + std::string(value_type_name(v.elem_type)) + "]";
    case ValueType::kBool:
      return load<uint8_t>(v.raw) ? "true" : "false";
    case ValueType::kFloat32:
      return std::to_string(load<float>(v.raw));
    case ValueType::kFloat64:
      return std::to_string(load<double>(v.raw));
    case ValueType::kUint64:
      return std::to_string(load<uint64_t>(v.raw));
    default:
      return std::to_string(integer_value(v.type, v.raw).value_or(0));
  }
}

bool is_gguf_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

}  // namespace specd::model::gguf
