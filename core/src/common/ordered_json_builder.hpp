// Builds an nlohmann::ordered_json document from SAX events in time linear in its size.
// ordered_json keeps an object's members in a vector and looks a key up linearly, so its own
// parser does O(members²) work per object: an 11 MB request body with 100,000 member names kept
// a server worker busy for minutes (the round-2 hostile campaign). This builder appends members
// and finds repeated keys through a hash index per open object; a repeated key keeps its first
// position and takes the last value, as ordered_json's own parser does. It refuses what the DOM
// parser refuses (a float that overflows: returns false, and the caller re-parses with the DOM
// parser for its exact error), so callers see the same document or the same error.
#pragma once

#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <unordered_map>
#include <vector>

namespace specd {

class OrderedJsonBuilder : public nlohmann::json_sax<nlohmann::ordered_json> {
 public:
  bool null() override { return add(nullptr); }
  bool boolean(bool v) override { return add(v); }
  bool number_integer(number_integer_t v) override { return add(v); }
  bool number_unsigned(number_unsigned_t v) override { return add(v); }
  bool number_float(number_float_t v, const string_t&) override { return std::isfinite(v) && add(v); }
  bool string(string_t& v) override { return add(std::move(v)); }
  bool binary(binary_t& v) override { return add(nlohmann::ordered_json::binary(std::move(v))); }
  bool start_object(std::size_t) override { return open(nlohmann::ordered_json::object()); }
  bool key(string_t& k) override {
    stack_.back().key = std::move(k);
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(nlohmann::ordered_json::array()); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

  nlohmann::ordered_json& result() { return root_; }

 private:
  struct Open {
    nlohmann::ordered_json* value;
    std::string key;                                  // objects: the member being read
    std::unordered_map<std::string, size_t> members;  // objects: key -> position
  };

  // Puts v where the innermost open container expects its next element; returns it.
  nlohmann::ordered_json* place(nlohmann::ordered_json&& v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Open& top = stack_.back();
    if (top.value->is_array()) {
      auto& a = top.value->get_ref<nlohmann::ordered_json::array_t&>();
      a.push_back(std::move(v));
      return &a.back();
    }
    auto& o = top.value->get_ref<nlohmann::ordered_json::object_t&>();
    auto [it, fresh] = top.members.try_emplace(top.key, o.size());
    if (!fresh) {
      nlohmann::ordered_json& slot = (o.begin() + static_cast<std::ptrdiff_t>(it->second))->second;
      slot = std::move(v);
      return &slot;
    }
    if (o.size() == o.capacity()) grow(o);
    o.emplace_back(top.key, std::move(v));  // the vector under ordered_map: no lookup
    return &o.back().second;
  }
  // The members' pairs have const keys, so their move may throw and std::vector grows by copying
  // them, values included: a 41 MB "prompt" array was copied whole when the member after it came.
  // This grows the vector by moving each value (and copying only the key).
  static void grow(nlohmann::ordered_json::object_t& o) {
    nlohmann::ordered_json::object_t grown;
    grown.reserve(o.capacity() < 4 ? 4 : 2 * o.capacity());
    for (auto& member : o) grown.emplace_back(member.first, std::move(member.second));
    o.swap(grown);
  }
  bool add(nlohmann::ordered_json&& v) {
    place(std::move(v));
    return true;
  }
  bool open(nlohmann::ordered_json&& v) {
    nlohmann::ordered_json* at = place(std::move(v));
    stack_.push_back({at, {}, {}});
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }

  nlohmann::ordered_json root_;
  std::vector<Open> stack_;
};

}  // namespace specd
