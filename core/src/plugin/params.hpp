// Params: a component's parameter subtree in the ABI's flattened form (specd_params), with
// the storage that keeps its strings alive. Built from a YAML node (config files) or from a
// key → value list (CLI flags, tests).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "specd/sdk/abi.h"

namespace YAML {
class Node;
}

namespace specd::plugin {

class Params {
 public:
  Params() { rebuild(); }
  // Flattens `node` (a map) below `path`, skipping the top-level key "name" (the component
  // selector) and `core_keys` (settings the core reads itself). Line numbers come from the
  // YAML marks.
  static Params from_yaml(const YAML::Node& node, std::string source_file, std::string path,
                          std::initializer_list<std::string_view> core_keys = {});
  // Scalars only, e.g. {{"prompt_lookup_max", "4"}}.
  static Params from_pairs(const std::vector<std::pair<std::string, std::string>>& pairs,
                           std::string source_file = "<cli>", std::string path = "");

  Params(const Params& other);
  Params& operator=(const Params& other);
  // Moves re-point the ABI views: short strings live inside the object (SSO).
  Params(Params&& other) noexcept;
  Params& operator=(Params&& other) noexcept;

  const specd_params* raw() const { return &raw_; }
  size_t size() const { return entries_.size(); }

  struct Entry {
    std::string key;
    int32_t kind;
    std::string text;
    int32_t line;
  };
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  void rebuild();
  std::string file_ = "<default>";
  std::string path_;
  int32_t line_ = 0;
  std::vector<Entry> entries_;
  std::vector<specd_param> views_;
  specd_params raw_{};
};

}  // namespace specd::plugin
