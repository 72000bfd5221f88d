// Typed access to config.json's fields, with errors naming the file and the key, and the readers
// of the per-family fields (model_families.cpp). Internal to core/src/model.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/untrusted.hpp"
#include "model/checkpoint.hpp"
#include "specd/error.hpp"

namespace specd::model::config_json {

using nlohmann::json;

[[noreturn]] inline void fail(ErrorCode code, const std::filesystem::path& file, const std::string& what) {
  throw Error(code, file.string() + ": " + what);
}

// Typed access to the fields of one JSON object, with errors naming the file and the key.
class Fields {
 public:
  Fields(const json& doc, const std::filesystem::path& file) : doc_(doc), file_(file) {}

  // Present and not null.
  bool has(const char* key) const {
    auto it = doc_.find(key);
    return it != doc_.end() && !it->is_null();
  }

  int64_t require_int(const char* key) const {
    if (!has(key)) fail(ErrorCode::kModelFormat, file_, std::string("missing field '") + key + "'");
    return get_int(key);
  }
  int64_t int_or(const char* key, int64_t fallback) const { return has(key) ? get_int(key) : fallback; }

  double number_or(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    const json& v = doc_.at(key);
    if (!v.is_number()) bad_type(key, "a number");
    return v.get<double>();
  }
  double require_number(const char* key) const {
    if (!has(key)) fail(ErrorCode::kModelFormat, file_, std::string("missing field '") + key + "'");
    return number_or(key, 0.0);
  }

  bool bool_or(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    const json& v = doc_.at(key);
    if (!v.is_boolean()) bad_type(key, "true or false");
    return v.get<bool>();
  }

  std::string string_or(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    const json& v = doc_.at(key);
    if (!v.is_string()) bad_type(key, "a string");
    return v.get<std::string>();
  }

  // An int or a list of ints (eos_token_id).
  std::vector<int32_t> int_list(const char* key) const {
    std::vector<int32_t> out;
    if (!has(key)) return out;
    const json& v = doc_.at(key);
    if (v.is_number_integer()) {
      out.push_back(to_token(key, v));
    } else if (v.is_array()) {
      for (const json& item : v) {
        if (!item.is_number_integer()) bad_type(key, "an integer or a list of integers");
        out.push_back(to_token(key, item));
      }
    } else {
      bad_type(key, "an integer or a list of integers");
    }
    return out;
  }

  const json& doc() const { return doc_; }
  const std::filesystem::path& file() const { return file_; }

 private:
  int64_t get_int(const char* key) const {
    const json& v = doc_.at(key);
    if (!v.is_number_integer()) bad_type(key, "an integer");
    return v.get<int64_t>();
  }
  int32_t to_token(const char* key, const json& v) const {
    const int64_t id = v.get<int64_t>();
    if (id < 0 || id > INT32_MAX) {
      fail(ErrorCode::kModelFormat, file_,
           std::string("field '") + key + "' holds token id " + std::to_string(id) + ", out of range");
    }
    return static_cast<int32_t>(id);
  }
  [[noreturn]] void bad_type(const char* key, const char* expected) const {
    fail(ErrorCode::kModelFormat, file_,
         std::string("field '") + key + "' must be " + expected + ", got " + describe(doc_.at(key)));
  }

  // A scalar as written (numbers and short strings), anything else by its type: never a dump of
  // an untrusted tree.
  static std::string describe(const json& v) {
    if (v.is_number() || v.is_boolean()) return v.dump();
    if (v.is_string()) {
      std::string out = "\"";  // (not "\"" + ...: gcc 12 warns falsely of overlapping copies)
      out += clip(v.get_ref<const std::string&>(), 40);
      out += '"';
      return out;
    }
    return std::string("an ") + json_type_name(v);
  }

  const json& doc_;
  const std::filesystem::path& file_;
};

// Dimensions and counts: positive and within int32, so products of two never overflow int64 and
// kernels may index with int32.
inline void require_positive(const Fields& f, const char* key, int64_t value) {
  if (value <= 0 || value > INT32_MAX) {
    fail(ErrorCode::kModelFormat, f.file(),
         std::string("field '") + key + "' must be in [1, " + std::to_string(INT32_MAX) + "], got " +
             std::to_string(value));
  }
}

// What differs between the families (model_families.cpp): biases, q/k norms, sliding windows,
// Gemma's fields, mixtures of experts.
void read_family(const Fields& f, const std::filesystem::path& path, ModelConfig& c);
void read_moe(const Fields& f, const std::filesystem::path& path, ModelConfig& c);

}  // namespace specd::model::config_json
