// C++ helpers for writing specd plugins. A plugin author derives from Proposer, Verifier or
// Scorer, reads its YAML parameters through Params, and declares the plugin with
// SPECD_PLUGIN(...). Everything here is header-only and lives in the plugin's own binary: the
// helpers translate exceptions and C++ types to the plain-C ABI in <specd/sdk/abi.h>. Batches
// are views from <specd/sdk/batch.hpp>; <specd/sdk/model_client.hpp> wraps model services.
//
//   class MyProposer : public specd::sdk::Proposer {
//    public:
//     MyProposer(specd::sdk::Host host, specd::sdk::Params& params)
//         : max_n_(params.get_int("max_n", 3, 1, 16)) {}
//     specd::sdk::ProposerCaps capabilities() const override { return {}; }
//     void propose(specd::sdk::ProposeBatch& batch) override { ... }
//    private:
//     int64_t max_n_;
//   };
//   SPECD_PLUGIN("my_plugin", "1.0.0",
//                specd::sdk::proposer<MyProposer>("my_proposer", "What it proposes"))
//
// Parameter errors are collected (not thrown one by one) so that a config with three mistakes
// reports three errors; keys the component never read are reported as unknown.
#pragma once

#include <boost/dll/alias.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "specd/sdk/abi.h"
#include "specd/sdk/batch.hpp"
#include "specd/sdk/error.hpp"

namespace specd::sdk {

// ---------------------------------------------------------------------------------------------
// Params: a component's YAML subtree with typed, range-checked getters.

class Params {
 public:
  explicit Params(const specd_params* raw) {
    if (raw == nullptr) return;
    file_ = raw->source_file ? raw->source_file : "<unknown>";
    path_ = raw->path ? raw->path : "";
    line_ = raw->line;
    entries_.assign(raw->entries, raw->entries + raw->count);
    used_.assign(entries_.size(), false);
  }

  const std::string& path() const { return path_; }
  const std::vector<std::string>& errors() const { return errors_; }

  bool has(std::string_view key) const { return find(key) != nullptr; }

  // A sequence of integers (`layers: [2, 16, 29]`), each in [min, max]; empty when absent.
  std::vector<int64_t> get_int_list(std::string_view key, int64_t min, int64_t max) {
    std::vector<int64_t> out;
    const specd_param* p = use(key);
    if (p == nullptr) return out;
    if (p->kind != SPECD_PARAM_SEQUENCE) {
      fail(p, "expected a sequence of integers, got a " + kind_name(p->kind));
      return out;
    }
    for (size_t i = 0;; ++i) {
      const std::string item = std::string(key) + "[" + std::to_string(i) + "]";
      if (!has(item)) break;
      out.push_back(get_int(item, 0, min, max));
    }
    return out;
  }

  // A nested map (e.g. `tree: {depth: 3}`): whether it is there. Its keys are read one by one
  // ("tree.depth") and reported as unknown when never read; anything but a map is an error.
  bool section(std::string_view key) {
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (key != entries_[i].key) continue;
      used_[i] = true;
      if (entries_[i].kind == SPECD_PARAM_NULL) return false;
      if (entries_[i].kind != SPECD_PARAM_MAP) {
        fail(&entries_[i], "expected a map, got a " + kind_name(entries_[i].kind));
        mark_children(key);
        return false;
      }
      return true;
    }
    return false;
  }

  int64_t get_int(std::string_view key, int64_t def, int64_t min, int64_t max) {
    const specd_param* p = use(key);
    if (p == nullptr) return def;
    int64_t value = 0;
    if (!parse_int(p, &value) || value < min || value > max) {
      fail(p, detail::concat("expected integer in [", min, ", ", max, "], got ", quoted(p)));
      return def;
    }
    return value;
  }

  double get_float(std::string_view key, double def, double min, double max) {
    const specd_param* p = use(key);
    if (p == nullptr) return def;
    double value = 0;
    if (!parse_float(p, &value) || !(value >= min && value <= max)) {
      fail(p, detail::concat("expected number in [", min, ", ", max, "], got ", quoted(p)));
      return def;
    }
    return value;
  }

  bool get_bool(std::string_view key, bool def) {
    const specd_param* p = use(key);
    if (p == nullptr) return def;
    const std::string_view t = p->kind == SPECD_PARAM_SCALAR ? p->text : "";
    if (t == "true" || t == "True" || t == "yes" || t == "on") return true;
    if (t == "false" || t == "False" || t == "no" || t == "off") return false;
    fail(p, detail::concat("expected boolean, got ", quoted(p)));
    return def;
  }

  std::string get_string(std::string_view key, std::string def) {
    const specd_param* p = use(key);
    if (p == nullptr) return def;
    if (p->kind != SPECD_PARAM_SCALAR) {
      fail(p, "expected string, got a " + kind_name(p->kind));
      return def;
    }
    return p->text;
  }

  std::string require_string(std::string_view key) {
    if (!has(key)) {
      missing(key, "string");
      return {};
    }
    return get_string(key, {});
  }

  std::string get_choice(std::string_view key, std::string def, std::initializer_list<std::string_view> choices) {
    const specd_param* p = find(key);
    std::string value = get_string(key, def);
    if (p == nullptr || p->kind != SPECD_PARAM_SCALAR) return value;
    if (std::find(choices.begin(), choices.end(), value) == choices.end()) {
      std::string list;
      for (auto c : choices) list += (list.empty() ? "" : ", ") + std::string(c);
      fail(p, detail::concat("expected one of ", list, ", got ", quoted(p)));
      return def;
    }
    return value;
  }

  // Records a custom validation error against a key (e.g. a relation between two fields).
  void error(std::string_view key, std::string_view message) {
    const specd_param* p = find(key);
    if (p != nullptr) {
      fail(p, std::string(message));
    } else {
      errors_.push_back(detail::concat(file_, ":", line_, ": ", full(key), ": ", message));
    }
  }

  // Adds "unknown key" errors for every key never read, then throws all errors at once.
  // Linear in the number of entries: they come in pre-order, so the children of an unknown key
  // follow it and are covered by its one error.
  void check() {
    size_t unknown = 0;
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (used_[i]) continue;
      const std::string_view key = entries_[i].key;
      if (++unknown <= kMaxReportedUnknown)
        errors_.push_back(detail::concat(file_, ":", entries_[i].line, ": ", full(key), ": unknown key"));
      while (i + 1 < entries_.size() && is_child(entries_[i + 1].key, key)) ++i;
    }
    if (unknown > kMaxReportedUnknown)
      errors_.push_back(
          detail::concat(file_, ":", line_, ": ", path_, ": ", unknown - kMaxReportedUnknown, " more unknown keys"));
    if (errors_.empty()) return;
    std::string all;
    for (const auto& e : errors_) all += (all.empty() ? "" : "\n") + e;
    throw Error(all, SPECD_ERR_INVALID_ARGUMENT);
  }

 private:
  const specd_param* find(std::string_view key) const {
    for (const auto& e : entries_)
      if (key == e.key) return &e;
    return nullptr;
  }
  const specd_param* use(std::string_view key) {
    for (size_t i = 0; i < entries_.size(); ++i)
      if (key == entries_[i].key) {
        used_[i] = true;
        mark_children(entries_[i].key);
        if (entries_[i].kind == SPECD_PARAM_NULL) return nullptr;  // `key:` with no value = default
        return &entries_[i];
      }
    return nullptr;
  }
  // A key read as a whole (e.g. a map handed to a sub-parser) covers its children.
  void mark_children(std::string_view key) {
    for (size_t i = 0; i < entries_.size(); ++i)
      if (is_child(entries_[i].key, key)) used_[i] = true;
  }
  static bool is_child(std::string_view k, std::string_view key) {
    return k.size() > key.size() && k.substr(0, key.size()) == key && (k[key.size()] == '.' || k[key.size()] == '[');
  }
  static constexpr size_t kMaxReportedUnknown = 20;
  std::string full(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }
  static std::string kind_name(int32_t kind) {
    switch (kind) {
      case SPECD_PARAM_SEQUENCE:
        return "sequence";
      case SPECD_PARAM_MAP:
        return "map";
      case SPECD_PARAM_NULL:
        return "null";
      default:
        return "scalar";
    }
  }
  static std::string quoted(const specd_param* p) {
    if (p->kind != SPECD_PARAM_SCALAR) return "a " + kind_name(p->kind);
    return std::string("\"") + p->text + "\"";
  }
  void fail(const specd_param* p, const std::string& message) {
    errors_.push_back(detail::concat(file_, ":", p->line, ": ", full(p->key), ": ", message));
  }
  void missing(std::string_view key, std::string_view type) {
    errors_.push_back(detail::concat(file_, ":", line_, ": ", full(key), ": required ", type, " is missing"));
  }
  static bool parse_int(const specd_param* p, int64_t* out) {
    if (p->kind != SPECD_PARAM_SCALAR || p->text[0] == '\0') return false;
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(p->text, &end, 10);
    if (errno != 0 || *end != '\0') return false;
    *out = v;
    return true;
  }
  static bool parse_float(const specd_param* p, double* out) {
    if (p->kind != SPECD_PARAM_SCALAR || p->text[0] == '\0') return false;
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(p->text, &end);
    if (errno != 0 || *end != '\0' || !std::isfinite(v)) return false;
    *out = v;
    return true;
  }

  std::string file_ = "<unknown>";
  std::string path_;
  int32_t line_ = 0;
  std::vector<specd_param> entries_;
  std::vector<bool> used_;
  std::vector<std::string> errors_;
};

// ---------------------------------------------------------------------------------------------
// Host services

class Logger {
 public:
  explicit Logger(const specd_host_services* host = nullptr) : host_(host) {}
  bool enabled(int32_t level) const {
    return host_ != nullptr && host_->log != nullptr &&
           (host_->log_enabled == nullptr || host_->log_enabled(host_->host_ctx, level) != 0);
  }
  template <class... Args>
  void trace(Args&&... a) const {
    write(SPECD_LOG_TRACE, std::forward<Args>(a)...);
  }
  template <class... Args>
  void debug(Args&&... a) const {
    write(SPECD_LOG_DEBUG, std::forward<Args>(a)...);
  }
  template <class... Args>
  void info(Args&&... a) const {
    write(SPECD_LOG_INFO, std::forward<Args>(a)...);
  }
  template <class... Args>
  void warn(Args&&... a) const {
    write(SPECD_LOG_WARN, std::forward<Args>(a)...);
  }
  template <class... Args>
  void error(Args&&... a) const {
    write(SPECD_LOG_ERROR, std::forward<Args>(a)...);
  }

 private:
  template <class... Args>
  void write(int32_t level, Args&&... args) const {
    if (!enabled(level)) return;
    const std::string text = detail::concat(std::forward<Args>(args)...);
    host_->log(host_->host_ctx, level, text.data(), text.size());
  }
  const specd_host_services* host_;
};

class Host {
 public:
  explicit Host(const specd_host_services* raw) : raw_(raw), log_(raw) {}
  const specd_host_services* raw() const { return raw_; }
  const Logger& log() const { return log_; }
  // Model services, or nullptr when this host runs no model (e.g. `specd plugins list`).
  const specd_model_services* models() const { return raw_ != nullptr ? raw_->models : nullptr; }
  // The ABI minor of the host (features marked "since 1.N" need host_abi_minor() >= N).
  uint32_t host_abi_minor() const { return raw_ != nullptr ? raw_->host_abi_minor : 0; }
  const specd_model_services& require_models() const {
    if (models() == nullptr) throw Error("this host provides no model services", SPECD_ERR_UNSUPPORTED);
    return *models();
  }
  void* host_ctx() const { return raw_->host_ctx; }
  // ABI 1.4: one observation of the series `name` for /metrics (abi.h: record); a no-op on
  // older hosts.
  void record(const char* name, double value) const {
    if (raw_ != nullptr && raw_->struct_size >= offsetof(specd_host_services, record) + sizeof(void*) &&
        raw_->record != nullptr)
      raw_->record(raw_->host_ctx, name, value);
  }
  // ABI 1.5, from inside propose: the tokens the sequence's grammar allows after `prefix`
  // (abi.h: allowed_tokens). False (mask untouched) when it has none or the host is older.
  bool allowed_tokens(uint64_t seq_id, std::span<const int32_t> prefix, std::span<uint64_t> mask) const {
    if (raw_ == nullptr || raw_->struct_size < offsetof(specd_host_services, allowed_tokens) + sizeof(void*) ||
        raw_->allowed_tokens == nullptr)
      return false;
    return raw_->allowed_tokens(raw_->host_ctx, seq_id, prefix.data(), static_cast<int32_t>(prefix.size()), mask.data(),
                                static_cast<int64_t>(mask.size())) == 1;
  }

 private:
  const specd_host_services* raw_;
  Logger log_;
};

// ---------------------------------------------------------------------------------------------
// Component base classes

struct ProposerCaps {
  bool produces_draft_probs = false;
  bool needs_target_hidden = false;
  bool keeps_state = false;
  bool supports_variable_k = true;
  int32_t max_k = 0;
  bool drafts_trees = false;  // ABI 1.3: may call ProposeBatch::set_tree
  // ABI 1.3: the target layers whose hidden states it reads (abi.h: aux_hidden_layers); the
  // array must live as long as the proposer (a member).
  std::span<const int32_t> aux_hidden_layers;
  // ABI 1.6: fills ProposeBatch::set_confidence where takes_confidence() (abi.h: reports_confidence).
  bool reports_confidence = false;
  // ABI 1.9, with drafts_trees: the most levels any tree it drafts has (abi.h: max_tree_depth).
  int32_t max_tree_depth = 0;
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual ProposerCaps capabilities() const = 0;
  virtual void on_prefill(const PrefillBatch&) {}
  virtual void propose(ProposeBatch& batch) = 0;
  virtual void on_accept(uint64_t /*seq_id*/, int32_t /*num_accepted*/, std::span<const int32_t> /*emitted*/) {}
  virtual void on_release(uint64_t /*seq_id*/) {}
  // ABI 1.4: the sequence finished (abi.h: on_finish); seq.tokens is its whole text.
  virtual void on_finish(const Sequence& /*seq*/) {}
};

struct VerifierCaps {
  bool needs_draft_probs = true;
  bool lossless = true;
  bool supports_cuda = false;
  bool supports_trees = false;  // ABI 1.3: verifies specd_verify_batch.draft_parents
};

class Verifier {
 public:
  virtual ~Verifier() = default;
  virtual VerifierCaps capabilities() const = 0;
  virtual void verify(const VerifyBatch& batch) = 0;
};

struct ScorerCaps {
  bool scores_trees = false;  // ABI 1.3: handles ScoreBatch::parents
};

class Scorer {
 public:
  virtual ~Scorer() = default;
  virtual ScorerCaps capabilities() const { return {}; }
  virtual void score(ScoreBatch& batch) = 0;
};

// ---------------------------------------------------------------------------------------------
// Trampolines: the C ABI functions that call into the classes above.

namespace detail {

inline int32_t proposer_caps(void* self, specd_proposer_caps* out) {
  return guard(nullptr, [&] {
    const ProposerCaps c = static_cast<Proposer*>(self)->capabilities();
    out->produces_draft_probs = c.produces_draft_probs;
    out->needs_target_hidden = c.needs_target_hidden;
    out->keeps_state = c.keeps_state;
    out->supports_variable_k = c.supports_variable_k;
    out->max_k = c.max_k;
    out->drafts_trees = c.drafts_trees;
    out->num_aux_hidden_layers = static_cast<int32_t>(c.aux_hidden_layers.size());
    out->aux_hidden_layers = c.aux_hidden_layers.data();
    out->reports_confidence = c.reports_confidence;
    out->max_tree_depth = c.max_tree_depth;
  });
}

inline const specd_proposer_vtable kProposerVtable = {
    sizeof(specd_proposer_vtable),
    [](void* self) { delete static_cast<Proposer*>(self); },
    &proposer_caps,
    [](void* self, const specd_prefill_batch* b, specd_error* err) {
      return guard(err, [&] {
        if (b == nullptr) throw Error("on_prefill: null batch");
        static_cast<Proposer*>(self)->on_prefill(PrefillBatch(b));
      });
    },
    [](void* self, specd_propose_batch* b, specd_error* err) {
      return guard(err, [&] {
        if (b == nullptr) throw Error("propose: null batch");
        ProposeBatch batch(b);
        static_cast<Proposer*>(self)->propose(batch);
      });
    },
    [](void* self, uint64_t seq, int32_t n, specd_token_view emitted, specd_error* err) {
      return guard(err, [&] {
        static_cast<Proposer*>(self)->on_accept(seq, n, {emitted.data, static_cast<size_t>(emitted.size)});
      });
    },
    [](void* self, uint64_t seq) { guard(nullptr, [&] { static_cast<Proposer*>(self)->on_release(seq); }); },
    [](void* self, const specd_sequence* seq) {
      guard(nullptr, [&] {
        if (seq != nullptr) static_cast<Proposer*>(self)->on_finish(Sequence::from(*seq));
      });
    },
};

inline const specd_verifier_vtable kVerifierVtable = {
    sizeof(specd_verifier_vtable),
    [](void* self) { delete static_cast<Verifier*>(self); },
    [](void* self, specd_verifier_caps* out) {
      return guard(nullptr, [&] {
        const VerifierCaps c = static_cast<Verifier*>(self)->capabilities();
        out->needs_draft_probs = c.needs_draft_probs;
        out->lossless = c.lossless;
        out->supports_cuda = c.supports_cuda;
        out->supports_trees = c.supports_trees;
      });
    },
    [](void* self, const specd_verify_batch* b, specd_error* err) {
      return guard(err, [&] {
        if (b == nullptr) throw Error("verify: null batch");
        static_cast<Verifier*>(self)->verify(VerifyBatch(b));
      });
    },
};

inline const specd_scorer_vtable kScorerVtable = {
    sizeof(specd_scorer_vtable),
    [](void* self) { delete static_cast<Scorer*>(self); },
    [](void* self, specd_score_batch* b, specd_error* err) {
      return guard(err, [&] {
        if (b == nullptr) throw Error("score: null batch");
        ScoreBatch batch(b);
        static_cast<Scorer*>(self)->score(batch);
      });
    },
    [](void* self, specd_scorer_caps* out) {
      return guard(nullptr, [&] { out->scores_trees = static_cast<Scorer*>(self)->capabilities().scores_trees; });
    },
};

template <class T>
concept HasStaticValidate = requires(Params& p) {
  T::validate(p);
};

template <class T, class Base>
int32_t create(const specd_host_services* host, const specd_params* raw, specd_component* out, specd_error* err) {
  static_assert(std::is_base_of_v<Base, T>, "component class must derive from the matching sdk base class");
  return guard(err, [&] {
    Params params(raw);
    auto* obj = new T(Host(host), params);
    try {
      params.check();
    } catch (...) {
      delete obj;
      throw;
    }
    out->self = static_cast<Base*>(obj);
    if constexpr (std::is_same_v<Base, Proposer>) out->vtable = &kProposerVtable;
    if constexpr (std::is_same_v<Base, Verifier>) out->vtable = &kVerifierVtable;
    if constexpr (std::is_same_v<Base, Scorer>) out->vtable = &kScorerVtable;
  });
}

template <class T>
int32_t validate(const specd_params* raw, specd_error* err) {
  return guard(err, [&] {
    Params params(raw);
    T::validate(params);
    params.check();
  });
}

template <class T, class Base>
specd_component_desc component(int32_t kind, const char* name, const char* description) {
  specd_component_desc d{};
  d.struct_size = sizeof(d);
  d.kind = kind;
  d.name = name;
  d.description = description;
  if constexpr (HasStaticValidate<T>) d.validate = &validate<T>;
  d.create = &create<T, Base>;
  return d;
}

struct PluginHolder {
  PluginHolder(const char* name, const char* version, std::initializer_list<specd_component_desc> list)
      : components(list) {
    desc.struct_size = sizeof(desc);
    desc.abi_major = SPECD_ABI_MAJOR;
    desc.abi_minor = SPECD_ABI_MINOR;
    desc.name = name;
    desc.version = version;
#ifdef SPECD_PLUGIN_CUDA_RUNTIME_MAJOR
    desc.cuda_runtime_major = SPECD_PLUGIN_CUDA_RUNTIME_MAJOR;
#else
    desc.cuda_runtime_major = 0;
#endif
    desc.num_components = static_cast<int32_t>(components.size());
    desc.components = components.data();
  }
  std::vector<specd_component_desc> components;
  specd_plugin_descriptor desc{};
};

}  // namespace detail

// Component declarations for SPECD_PLUGIN. name and description must be string literals (or
// otherwise live as long as the library).
// A component class T has a constructor T(Host, Params&) and may have `static void
// validate(Params&)` that checks parameters without creating anything.
template <class T>
specd_component_desc proposer(const char* name, const char* description) {
  return detail::component<T, Proposer>(SPECD_COMPONENT_PROPOSER, name, description);
}
template <class T>
specd_component_desc verifier(const char* name, const char* description) {
  return detail::component<T, Verifier>(SPECD_COMPONENT_VERIFIER, name, description);
}
template <class T>
specd_component_desc scorer(const char* name, const char* description) {
  return detail::component<T, Scorer>(SPECD_COMPONENT_SCORER, name, description);
}

}  // namespace specd::sdk

// Declares the plugin and exports its single entry symbol, specd_plugin_entry_v<major>.
// Use once per plugin library, at namespace scope.
#define SPECD_PLUGIN(plugin_name, plugin_version, ...)                                                      \
  namespace {                                                                                               \
  const specd_plugin_descriptor* specd_plugin_entry_impl() {                                                \
    static const ::specd::sdk::detail::PluginHolder holder((plugin_name), (plugin_version), {__VA_ARGS__}); \
    return &holder.desc;                                                                                    \
  }                                                                                                         \
  }                                                                                                         \
  BOOST_DLL_ALIAS(specd_plugin_entry_impl, specd_plugin_entry_v1)
