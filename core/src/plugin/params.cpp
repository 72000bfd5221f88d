#include "plugin/params.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>

namespace specd::plugin {
namespace {

// Pre-order (a map or sequence entry comes before its children, which follow it contiguously).
// Recursion depth and size are bounded by the checks every config file passes
// (config/yaml_guard.hpp: no aliases, nesting <= 64).
void flatten(const YAML::Node& node, const std::string& key, std::vector<Params::Entry>& out) {
  const int32_t line = node.Mark().line >= 0 ? node.Mark().line + 1 : 0;
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      out.push_back({key, SPECD_PARAM_SCALAR, node.Scalar(), line});
      return;
    case YAML::NodeType::Sequence: {
      out.push_back({key, SPECD_PARAM_SEQUENCE, "", line});
      size_t i = 0;
      for (const YAML::Node& item : node) flatten(item, key + "[" + std::to_string(i++) + "]", out);
      return;
    }
    case YAML::NodeType::Map: {
      out.push_back({key, SPECD_PARAM_MAP, "", line});
      for (const auto& kv : node) flatten(kv.second, key + "." + kv.first.Scalar(), out);
      return;
    }
    default:
      out.push_back({key, SPECD_PARAM_NULL, "", line});
  }
}

}  // namespace

Params Params::from_yaml(const YAML::Node& node, std::string source_file, std::string path,
                         std::initializer_list<std::string_view> core_keys) {
  Params p;
  p.file_ = std::move(source_file);
  p.path_ = std::move(path);
  p.line_ = node.Mark().line >= 0 ? node.Mark().line + 1 : 0;
  if (node.IsMap()) {
    for (const auto& kv : node) {
      const std::string key = kv.first.Scalar();
      if (key == "name" || std::find(core_keys.begin(), core_keys.end(), key) != core_keys.end()) continue;
      flatten(kv.second, key, p.entries_);
    }
  }
  p.rebuild();
  return p;
}

Params Params::from_pairs(const std::vector<std::pair<std::string, std::string>>& pairs, std::string source_file,
                          std::string path) {
  Params p;
  p.file_ = std::move(source_file);
  p.path_ = std::move(path);
  for (const auto& [k, v] : pairs) p.entries_.push_back({k, SPECD_PARAM_SCALAR, v, 0});
  p.rebuild();
  return p;
}

Params::Params(const Params& other)
    : file_(other.file_), path_(other.path_), line_(other.line_), entries_(other.entries_) {
  rebuild();
}

Params& Params::operator=(const Params& other) {
  if (this != &other) {
    file_ = other.file_;
    path_ = other.path_;
    line_ = other.line_;
    entries_ = other.entries_;
    rebuild();
  }
  return *this;
}

Params::Params(Params&& other) noexcept
    : file_(std::move(other.file_)),
      path_(std::move(other.path_)),
      line_(other.line_),
      entries_(std::move(other.entries_)) {
  rebuild();
  other.rebuild();
}

Params& Params::operator=(Params&& other) noexcept {
  if (this != &other) {
    file_ = std::move(other.file_);
    path_ = std::move(other.path_);
    line_ = other.line_;
    entries_ = std::move(other.entries_);
    rebuild();
    other.rebuild();
  }
  return *this;
}

// Points the ABI views at this object's strings; called after every change of storage.
void Params::rebuild() {
  views_.clear();
  views_.reserve(entries_.size());
  for (const auto& e : entries_) views_.push_back({e.key.c_str(), e.kind, e.text.c_str(), e.line});
  raw_ = {};
  raw_.struct_size = sizeof(raw_);
  raw_.source_file = file_.c_str();
  raw_.path = path_.c_str();
  raw_.line = line_;
  raw_.count = static_cast<int64_t>(views_.size());
  raw_.entries = views_.data();
}

}  // namespace specd::plugin
