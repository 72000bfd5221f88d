// A minimal GGUF parser for the writer's tests, written from the format description
// (ggml/include/gguf.h) independently of tools/gguf, so the tests check the file layout rather
// than the writer against itself. Throws std::runtime_error on anything out of bounds.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace specd::gguf::test {

struct Value {
  uint32_t type = 0;         // gguf_type
  uint64_t u = 0;            // integer and bool values (sign-extended for signed types)
  double f = 0;              // float32 / float64
  std::string s;             // string
  uint32_t elem_type = 0;    // arrays: element type
  std::vector<Value> items;  // arrays
};

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> ne;
  uint32_t type = 0;
  uint64_t offset = 0;  // relative to the data section
};

struct File {
  std::string bytes;  // the whole file
  uint32_t version = 0;
  uint64_t tensor_count = 0, kv_count = 0;
  std::vector<std::string> keys;  // in file order
  std::map<std::string, Value> kv;
  std::vector<TensorInfo> tensors;
  uint64_t alignment = 32;
  uint64_t data_start = 0;  // absolute offset of the data section

  const Value& at(const std::string& key) const {
    const auto it = kv.find(key);
    if (it == kv.end()) throw std::runtime_error("no key " + key);
    return it->second;
  }
  const TensorInfo* tensor(const std::string& name) const {
    for (const TensorInfo& t : tensors)
      if (t.name == name) return &t;
    return nullptr;
  }
  // The tensor's bytes, `nbytes` long.
  const char* data(const TensorInfo& t, uint64_t nbytes) const {
    if (data_start + t.offset + nbytes > bytes.size()) throw std::runtime_error("tensor " + t.name + " past the end");
    return bytes.data() + data_start + t.offset;
  }
};

class Parser {
 public:
  explicit Parser(const std::string& bytes) : b_(bytes) {}

  template <typename T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str() {
    const auto n = get<uint64_t>();
    need(n);
    std::string s = b_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  Value value(uint32_t type, int depth = 0) {
    Value v;
    v.type = type;
    switch (type) {
      case 0:
        v.u = get<uint8_t>();
        break;
      case 1:
        v.u = static_cast<uint64_t>(static_cast<int64_t>(get<int8_t>()));
        break;
      case 2:
        v.u = get<uint16_t>();
        break;
      case 3:
        v.u = static_cast<uint64_t>(static_cast<int64_t>(get<int16_t>()));
        break;
      case 4:
        v.u = get<uint32_t>();
        break;
      case 5:
        v.u = static_cast<uint64_t>(static_cast<int64_t>(get<int32_t>()));
        break;
      case 6:
        v.f = get<float>();
        break;
      case 7:
        v.u = get<uint8_t>();
        break;
      case 8:
        v.s = str();
        break;
      case 9: {
        if (depth > 0) throw std::runtime_error("nested array");
        v.elem_type = get<uint32_t>();
        const auto n = get<uint64_t>();
        if (n > b_.size() - pos_) throw std::runtime_error("array count past the end");
        v.items.reserve(n);
        for (uint64_t i = 0; i < n; ++i) v.items.push_back(value(v.elem_type, depth + 1));
        break;
      }
      case 10:
        v.u = get<uint64_t>();
        break;
      case 11:
        v.u = static_cast<uint64_t>(get<int64_t>());
        break;
      case 12:
        v.f = get<double>();
        break;
      default:
        throw std::runtime_error("bad value type " + std::to_string(type));
    }
    return v;
  }
  size_t pos() const { return pos_; }

 private:
  void need(uint64_t n) const {
    if (n > b_.size() - pos_) throw std::runtime_error("read past the end at " + std::to_string(pos_));
  }
  const std::string& b_;
  size_t pos_ = 0;
};

inline File read_gguf(const std::filesystem::path& path) {
  File f;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  f.bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  Parser p(f.bytes);
  if (f.bytes.compare(0, 4, "GGUF") != 0) throw std::runtime_error("bad magic");
  p.get<uint32_t>();
  f.version = p.get<uint32_t>();
  f.tensor_count = p.get<uint64_t>();
  f.kv_count = p.get<uint64_t>();
  for (uint64_t i = 0; i < f.kv_count; ++i) {
    std::string key = p.str();
    const auto type = p.get<uint32_t>();
    if (f.kv.count(key)) throw std::runtime_error("duplicate key " + key);
    f.keys.push_back(key);
    f.kv[key] = p.value(type);
  }
  for (uint64_t i = 0; i < f.tensor_count; ++i) {
    TensorInfo t;
    t.name = p.str();
    const auto n_dims = p.get<uint32_t>();
    if (n_dims == 0 || n_dims > 4) throw std::runtime_error("bad n_dims for " + t.name);
    for (uint32_t d = 0; d < n_dims; ++d) t.ne.push_back(p.get<uint64_t>());
    t.type = p.get<uint32_t>();
    t.offset = p.get<uint64_t>();
    f.tensors.push_back(std::move(t));
  }
  if (const auto it = f.kv.find("general.alignment"); it != f.kv.end()) f.alignment = it->second.u;
  f.data_start = (p.pos() + f.alignment - 1) / f.alignment * f.alignment;
  return f;
}

}  // namespace specd::gguf::test
