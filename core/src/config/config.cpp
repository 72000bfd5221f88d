#include "config/config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

#include "common/untrusted.hpp"
#include "config/yaml_guard.hpp"
#include "specd/error.hpp"
#include "specd/request.hpp"

namespace specd::config {
namespace fs = std::filesystem;

namespace {

std::string quote(const YAML::Node& n) {
  if (n.IsScalar()) return "\"" + clip(n.Scalar()) + "\"";
  if (n.IsSequence()) return "a sequence";
  if (n.IsMap()) return "a map";
  return "null";
}

// Walks the YAML tree, filling EngineConfig and collecting every error with its location.
class Reader {
 public:
  Reader(std::string file, fs::path base_dir, std::set<std::string> overridden)
      : file_(std::move(file)), base_dir_(std::move(base_dir)), overridden_(std::move(overridden)) {}

  std::vector<std::string>& errors() { return errors_; }

  void error(const YAML::Node& node, const std::string& path, const std::string& message) {
    errors_.push_back(where(node, path) + ": " + path + ": " + message);
  }

  std::string where(const YAML::Node& node, const std::string& path) const {
    if (overridden_.count(path)) return "--set " + path;
    const int line = node.IsDefined() && node.Mark().line >= 0 ? node.Mark().line + 1 : 0;
    return file_ + (line > 0 ? ":" + std::to_string(line) : "");
  }

  // A map section; reports unknown keys. Returns false (and reports) if present but not a map.
  bool section(const YAML::Node& node, const std::string& path, std::initializer_list<const char*> keys) {
    if (!node.IsDefined() || node.IsNull()) return false;
    if (!node.IsMap()) {
      error(node, path, "expected a map, got " + quote(node));
      return false;
    }
    for (const auto& kv : node) {
      const std::string key = clip(kv.first.Scalar());
      bool known = false;
      for (const char* k : keys) known = known || key == k;
      if (!known) {
        std::string list;
        for (const char* k : keys) list += (list.empty() ? "" : ", ") + std::string(k);
        errors_.push_back(where(kv.first, join(path, key)) + ": " + join(path, key) +
                          ": unknown key (expected one of: " + list + ")");
      }
    }
    return true;
  }

  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  void get_int(const YAML::Node& map, const std::string& path, const char* key, int64_t min, int64_t max, auto& out) {
    const YAML::Node n = map[key];
    if (!n.IsDefined() || n.IsNull()) return;
    const std::string p = join(path, key);
    int64_t v = 0;
    if (!n.IsScalar() || !parse_int(n.Scalar(), &v) || v < min || v > max) {
      error(n, p, "expected integer in [" + std::to_string(min) + ", " + std::to_string(max) + "], got " + quote(n));
      return;
    }
    out = static_cast<std::remove_reference_t<decltype(out)>>(v);
  }

  void get_float(const YAML::Node& map, const std::string& path, const char* key, double min, double max, bool open_min,
                 double& out) {
    const YAML::Node n = map[key];
    if (!n.IsDefined() || n.IsNull()) return;
    const std::string p = join(path, key);
    double v = 0;
    const bool ok = n.IsScalar() && parse_float(n.Scalar(), &v) && (open_min ? v > min : v >= min) && v <= max;
    if (!ok) {
      std::ostringstream os;
      os << "expected number in " << (open_min ? "(" : "[") << min << ", " << max << "], got " << quote(n);
      error(n, p, os.str());
      return;
    }
    out = v;
  }

  void get_bool(const YAML::Node& map, const std::string& path, const char* key, bool& out) {
    const YAML::Node n = map[key];
    if (!n.IsDefined() || n.IsNull()) return;
    const std::string t = n.IsScalar() ? n.Scalar() : "";
    if (t == "true" || t == "yes" || t == "on" || t == "True") {
      out = true;
    } else if (t == "false" || t == "no" || t == "off" || t == "False") {
      out = false;
    } else {
      error(n, join(path, key), "expected boolean, got " + quote(n));
    }
  }

  void get_string(const YAML::Node& map, const std::string& path, const char* key, std::string& out) {
    const YAML::Node n = map[key];
    if (!n.IsDefined() || n.IsNull()) return;
    if (!n.IsScalar()) {
      error(n, join(path, key), "expected string, got " + quote(n));
      return;
    }
    out = n.Scalar();
  }

  void get_choice(const YAML::Node& map, const std::string& path, const char* key,
                  std::initializer_list<const char*> choices, std::string& out) {
    std::string value = out;
    get_string(map, path, key, value);
    const YAML::Node n = map[key];
    if (!n.IsDefined() || !n.IsScalar()) return;
    for (const char* c : choices)
      if (value == c) {
        out = value;
        return;
      }
    std::string list;
    for (const char* c : choices) list += (list.empty() ? "" : ", ") + std::string(c);
    error(n, join(path, key), "expected one of " + list + ", got " + quote(n));
  }

  // A path value: relative paths in a file resolve against the file's directory.
  void get_path(const YAML::Node& map, const std::string& path, const char* key, std::string& out) {
    std::string value;
    get_string(map, path, key, value);
    if (!value.empty()) out = resolve(join(path, key), value);
  }

  std::string resolve(const std::string& path, const std::string& value) const {
    if (value.empty() || fs::path(value).is_absolute() || overridden_.count(path) || base_dir_.empty()) return value;
    return (base_dir_ / value).lexically_normal().string();
  }

  void get_string_list(const YAML::Node& map, const std::string& path, const char* key, bool paths,
                       std::vector<std::string>& out) {
    const YAML::Node n = map[key];
    if (!n.IsDefined() || n.IsNull()) return;
    const std::string p = join(path, key);
    if (!n.IsSequence()) {
      error(n, p, "expected a list of strings, got " + quote(n));
      return;
    }
    out.clear();
    size_t i = 0;
    for (const YAML::Node& item : n) {
      if (!item.IsScalar()) {
        error(item, p + "[" + std::to_string(i) + "]", "expected string, got " + quote(item));
      } else {
        out.push_back(paths ? resolve(p, item.Scalar()) : item.Scalar());
      }
      ++i;
    }
  }

  // `core_keys`: keys of the node the core reads itself; they are not handed to the plugin.
  void component(const YAML::Node& parent, const char* key, const std::string& path, ComponentConfig& out,
                 bool required, std::initializer_list<std::string_view> core_keys = {}) {
    const YAML::Node n = parent[key];
    if (!n.IsDefined() || n.IsNull()) {
      if (required) error(parent, path, "required key is missing");
      return;
    }
    out.line = n.Mark().line + 1;
    if (n.IsScalar()) {  // shorthand: `proposer: ngram`
      out.name = n.Scalar();
      out.params = plugin::Params::from_pairs({}, file_, path);
      return;
    }
    if (!n.IsMap()) {
      error(n, path, "expected a component name or a map with `name`, got " + quote(n));
      return;
    }
    const YAML::Node name = n["name"];
    if (!name.IsDefined() || !name.IsScalar() || name.Scalar().empty()) {
      error(n, path + ".name", "required component name is missing");
      return;
    }
    out.name = name.Scalar();
    out.params = plugin::Params::from_yaml(n, file_, path, core_keys);
  }

  static bool parse_int(const std::string& s, int64_t* out) {
    if (s.empty()) return false;
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (errno != 0 || *end != '\0') return false;
    *out = v;
    return true;
  }
  static bool parse_float(const std::string& s, double* out) {
    if (s.empty()) return false;
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(s.c_str(), &end);
    if (errno != 0 || *end != '\0' || !std::isfinite(v)) return false;
    *out = v;
    return true;
  }

  const std::string& file() const { return file_; }

 private:
  std::string file_;
  fs::path base_dir_;
  std::set<std::string> overridden_;
  std::vector<std::string> errors_;
};

void read_model(Reader& r, const YAML::Node& root, EngineConfig& c) {
  const YAML::Node n = root["model"];
  if (!n.IsDefined() || n.IsNull()) {
    r.errors().push_back(r.file() + ": model: required section is missing");
    return;
  }
  if (!r.section(n, "model",
                 {"path", "tokenizer", "dtype", "device", "max_model_len", "num_threads", "seed", "mmap",
                  "tensor_parallel_size", "sampler", "cuda_graphs"}))
    return;
  r.get_path(n, "model", "path", c.model.path);
  if (c.model.path.empty()) r.error(n, "model.path", "required string is missing");
  r.get_path(n, "model", "tokenizer", c.model.tokenizer);
  r.get_choice(
      n, "model", "dtype",
      {"auto", "f32", "f16", "bf16", "q8_0", "q4_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "q4_k_m", "q5_k_m"},
      c.model.dtype);
  r.get_string(n, "model", "device", c.model.device);
  const std::string& d = c.model.device;
  bool device_ok = d == "cpu" || d == "cuda" || d == "staged";
  if (!device_ok && d.rfind("cuda:", 0) == 0 && d.size() > 5) {
    device_ok = d.find_first_not_of("0123456789", 5) == std::string::npos && d.size() <= 8;
  }
  if (!device_ok) r.error(n["device"], "model.device", "expected cpu, cuda, cuda:N or staged, got \"" + d + "\"");
  r.get_int(n, "model", "max_model_len", 0, int64_t{1} << 24, c.model.max_model_len);
  r.get_int(n, "model", "num_threads", 0, 1024, c.model.num_threads);
  r.get_bool(n, "model", "mmap", c.model.mmap);
  r.get_int(n, "model", "seed", 0, int64_t{1} << 31, c.model.seed);
  r.get_int(n, "model", "tensor_parallel_size", 0, 1024, c.model.tensor_parallel_size);
  r.get_choice(n, "model", "sampler", {"auto", "inverse_cdf", "gumbel"}, c.model.sampler);
  r.get_bool(n, "model", "cuda_graphs", c.model.cuda_graphs);
  if (n["cuda_graphs"].IsDefined() && d.rfind("cuda", 0) != 0)
    r.error(n["cuda_graphs"], "model.cuda_graphs",
            "applies to model.device cuda; the model runs on the " + d + " (no graphs there)");
}

// model.sampler auto → gumbel when any verifier is `coupled` (its acceptance test is "the draft
// equals the engine's own Gumbel-max draw"), else inverse_cdf; inverse_cdf with `coupled` is an
// error.
void resolve_sampler(Reader& r, const YAML::Node& root, EngineConfig& c) {
  const SpeculativeConfig& s = c.speculative;
  bool coupled = s.enabled && s.verifier.name == "coupled";
  for (const ArmConfig& a : s.arms) coupled = coupled || (s.enabled && a.verifier.name == "coupled");
  if (c.model.sampler == "auto") {
    c.model.sampler = coupled ? "gumbel" : "inverse_cdf";
  } else if (coupled && c.model.sampler != "gumbel") {
    r.error(root["model"]["sampler"], "model.sampler",
            "the coupled verifier accepts a draft when it equals the engine's Gumbel-max draw, so it needs "
            "model.sampler: gumbel (or auto), got \"" +
                c.model.sampler + "\"");
  }
}

void read_arm(Reader& r, const YAML::Node& n, const std::string& path, SpeculativeConfig& s) {
  if (!n.IsMap()) {
    r.error(n, path, "expected a map with name, verifier, num_speculative_tokens, weight, got " + quote(n));
    return;
  }
  r.section(n, path, {"name", "verifier", "num_speculative_tokens", "weight"});
  ArmConfig arm;
  r.get_string(n, path, "name", arm.name);
  if (!valid_arm_name(arm.name)) {
    r.error(n["name"].IsDefined() ? n["name"] : n, path + ".name",
            "expected 1 to 64 characters of A-Z a-z 0-9 _ - ., got \"" + arm.name + "\"");
  }
  for (const ArmConfig& other : s.arms)
    if (!arm.name.empty() && other.name == arm.name)
      r.error(n["name"], path + ".name", "duplicate arm \"" + arm.name + "\"");
  r.component(n, "verifier", path + ".verifier", arm.verifier, true);
  r.get_int(n, path, "num_speculative_tokens", 1, kMaxSpeculativeTokens, arm.num_speculative_tokens);
  r.get_float(n, path, "weight", 0.0, 1e6, false, arm.weight);
  s.arms.push_back(std::move(arm));
}

// speculative.arms, speculative.shadow and the A/B log (docs/ab-testing.md).
void read_ab(Reader& r, const YAML::Node& n, SpeculativeConfig& s) {
  if (const YAML::Node arms = n["arms"]; arms.IsDefined() && !arms.IsNull()) {
    if (!arms.IsSequence() || arms.size() == 0) {
      r.error(arms, "speculative.arms", "expected a non-empty list of arms, got " + quote(arms));
    } else {
      for (size_t i = 0; i < arms.size(); ++i) read_arm(r, arms[i], "speculative.arms[" + std::to_string(i) + "]", s);
      if (n["verifier"].IsDefined() && !n["verifier"].IsNull())
        r.error(n["verifier"], "speculative.verifier",
                "give either speculative.verifier or speculative.arms, not both");
      double total = 0;
      for (const ArmConfig& a : s.arms) total += a.weight;
      if (total <= 0) r.error(arms, "speculative.arms", "at least one arm needs a weight above 0");
    }
  }
  if (const YAML::Node sh = n["shadow"]; sh.IsDefined() && !sh.IsNull()) {
    if (s.arms.empty()) {
      r.error(sh, "speculative.shadow", "needs speculative.arms (a shadow arm verifies another arm's drafts)");
    } else if (sh.IsScalar() && sh.Scalar() == "all") {
      for (const ArmConfig& a : s.arms) s.shadow.push_back(a.name);
    } else {
      r.get_string_list(n, "speculative", "shadow", false, s.shadow);
      std::set<std::string> seen;
      for (size_t i = 0; i < s.shadow.size(); ++i) {
        const std::string& name = s.shadow[i];
        const std::string at = "speculative.shadow[" + std::to_string(i) + "]";
        const bool known =
            std::any_of(s.arms.begin(), s.arms.end(), [&](const ArmConfig& a) { return a.name == name; });
        if (!known) r.error(sh, at, "no arm is named \"" + name + "\" (or give `all`)");
        if (!seen.insert(name).second) r.error(sh, at, "arm \"" + name + "\" is listed twice");
      }
    }
  }
  r.get_path(n, "speculative", "ab_log", s.ab_log);
  r.get_int(n, "speculative", "ab_log_max_mib", 1, int64_t{1} << 20, s.ab_log_max_mib);
  r.get_int(n, "speculative", "ab_log_keep", 1, 1000, s.ab_log_keep);
}

void read_speculative(Reader& r, const YAML::Node& root, EngineConfig& c) {
  const YAML::Node n = root["speculative"];
  if (!r.section(n, "speculative",
                 {"enabled", "num_speculative_tokens", "dynamic", "proposer", "verifier", "scorer",
                  "disable_by_batch_size", "arms", "shadow", "ab_log", "ab_log_max_mib", "ab_log_keep"}))
    return;
  auto& s = c.speculative;
  s.enabled = true;
  r.get_bool(n, "speculative", "enabled", s.enabled);
  r.get_int(n, "speculative", "num_speculative_tokens", 1, kMaxSpeculativeTokens, s.num_speculative_tokens);
  r.get_bool(n, "speculative", "dynamic", s.dynamic);
  r.get_int(n, "speculative", "disable_by_batch_size", 0, 1 << 20, s.disable_by_batch_size);
  r.component(n, "proposer", "speculative.proposer", s.proposer, true, {"tensor_parallel_size"});
  if (const YAML::Node p = n["proposer"]; p.IsDefined() && p.IsMap())
    r.get_int(p, "speculative.proposer", "tensor_parallel_size", 1, 1024, s.proposer_tensor_parallel_size);
  s.verifier.name = "rejection";
  s.verifier.params = plugin::Params::from_pairs({}, r.file(), "speculative.verifier");
  r.component(n, "verifier", "speculative.verifier", s.verifier, false);
  s.scorer.name = "mqa";
  s.scorer.params = plugin::Params::from_pairs({}, r.file(), "speculative.scorer");
  r.component(n, "scorer", "speculative.scorer", s.scorer, false);
  if (s.scorer.name == "mqa" && s.scorer.params.size() > 0)
    r.error(n["scorer"], "speculative.scorer." + s.scorer.params.entries().front().key,
            "unknown key (the built-in mqa scorer takes no parameters)");
  read_ab(r, n, s);
}

void read_rest(Reader& r, const YAML::Node& root, EngineConfig& c) {
  if (YAML::Node n = root["scheduler"]; r.section(n, "scheduler",
                                                  {"max_num_seqs", "max_num_batched_tokens", "chunked_prefill",
                                                   "max_queue", "async_scheduling", "num_scheduler_steps"})) {
    r.get_int(n, "scheduler", "max_num_seqs", 1, 4096, c.scheduler.max_num_seqs);
    r.get_int(n, "scheduler", "max_num_batched_tokens", 1, 1 << 20, c.scheduler.max_num_batched_tokens);
    r.get_bool(n, "scheduler", "chunked_prefill", c.scheduler.chunked_prefill);
    r.get_int(n, "scheduler", "max_queue", 1, 1 << 20, c.scheduler.max_queue);
    r.get_bool(n, "scheduler", "async_scheduling", c.scheduler.async_scheduling);
    r.get_int(n, "scheduler", "num_scheduler_steps", 1, 64, c.scheduler.num_scheduler_steps);
  }
  if (YAML::Node n = root["kv_cache"];
      r.section(n, "kv_cache", {"block_size", "memory_mib", "dtype", "prefix_caching", "gpu_memory_fraction"})) {
    r.get_int(n, "kv_cache", "block_size", 1, 256, c.kv_cache.block_size);
    const int32_t b = c.kv_cache.block_size;
    if ((b & (b - 1)) != 0)
      r.error(n["block_size"], "kv_cache.block_size", "expected a power of two, got " + std::to_string(b));
    r.get_int(n, "kv_cache", "memory_mib", 0, int64_t{1} << 22, c.kv_cache.memory_mib);
    r.get_choice(n, "kv_cache", "dtype", {"auto", "f32", "f16", "bf16"}, c.kv_cache.dtype);
    r.get_bool(n, "kv_cache", "prefix_caching", c.kv_cache.prefix_caching);
    r.get_float(n, "kv_cache", "gpu_memory_fraction", 0.0, 1.0, true, c.kv_cache.gpu_memory_fraction);
    // It sizes the KV cache in GPU memory: with the model on the cpu nothing would read it.
    if (c.kv_cache.gpu_memory_fraction != KvCacheConfig{}.gpu_memory_fraction && c.model.device.rfind("cuda", 0) != 0)
      r.error(n["gpu_memory_fraction"], "kv_cache.gpu_memory_fraction",
              "sizes the KV cache in GPU memory and applies to model.device cuda; the model runs on the " +
                  c.model.device + " (kv_cache.memory_mib sizes it there)");
  }
  if (YAML::Node n = root["server"]; r.section(n, "server",
                                               {"host",
                                                "port",
                                                "model_name",
                                                "api_keys",
                                                "api_key_env",
                                                "max_body_bytes",
                                                "max_prompt_tokens",
                                                "max_tokens_limit",
                                                "chat_template",
                                                "tool_call_parser",
                                                "allow_unsupported_tools",
                                                "template_timeout_ms",
                                                "stream_token_by_token",
                                                "shutdown_timeout_s",
                                                "max_connections",
                                                "idle_timeout_s",
                                                "header_timeout_s",
                                                "body_timeout_s",
                                                "write_timeout_s",
                                                "cors_allow_origins"})) {
    auto& s = c.server;
    r.get_string(n, "server", "host", s.host);
    r.get_int(n, "server", "port", 0, 65535, s.port);
    r.get_string(n, "server", "model_name", s.model_name);
    r.get_string_list(n, "server", "api_keys", false, s.api_keys);
    r.get_string(n, "server", "api_key_env", s.api_key_env);
    r.get_int(n, "server", "max_body_bytes", 1024, int64_t{1} << 30, s.max_body_bytes);
    r.get_int(n, "server", "max_prompt_tokens", 0, 1 << 24, s.max_prompt_tokens);
    r.get_int(n, "server", "max_tokens_limit", 0, 1 << 24, s.max_tokens_limit);
    r.get_string(n, "server", "chat_template", s.chat_template);
    r.get_choice(n, "server", "tool_call_parser", {"auto", "hermes", "llama3_json", "none"}, s.tool_call_parser);
    r.get_bool(n, "server", "allow_unsupported_tools", s.allow_unsupported_tools);
    r.get_bool(n, "server", "stream_token_by_token", s.stream_token_by_token);
    r.get_int(n, "server", "shutdown_timeout_s", 0, 3600, s.shutdown_timeout_s);
    r.get_int(n, "server", "template_timeout_ms", 0, 3'600'000, s.template_timeout_ms);
    r.get_int(n, "server", "max_connections", 1, 1 << 20, s.max_connections);
    r.get_float(n, "server", "idle_timeout_s", 0.0, 3600.0, true, s.idle_timeout_s);
    r.get_float(n, "server", "header_timeout_s", 0.0, 3600.0, true, s.header_timeout_s);
    r.get_float(n, "server", "body_timeout_s", 0.0, 3600.0, true, s.body_timeout_s);
    r.get_float(n, "server", "write_timeout_s", 0.0, 3600.0, true, s.write_timeout_s);
    r.get_string_list(n, "server", "cors_allow_origins", false, s.cors_allow_origins);
    for (size_t i = 0; i < s.cors_allow_origins.size(); ++i) {
      const std::string& o = s.cors_allow_origins[i];
      const bool scheme = o.starts_with("http://") || o.starts_with("https://");
      const std::string_view host = scheme ? std::string_view(o).substr(o.find("://") + 3) : std::string_view();
      const bool ok = o == "*" || (scheme && !host.empty() && host.find_first_of("/ \t*") == std::string_view::npos);
      if (!ok)
        r.error(n["cors_allow_origins"][i], "server.cors_allow_origins[" + std::to_string(i) + "]",
                "expected \"*\" or an origin such as https://example.com:8080 (scheme, host, optional port), got \"" +
                    o + "\"");
    }
  }
  if (YAML::Node n = root["plugins"]; r.section(n, "plugins", {"paths"})) {
    r.get_string_list(n, "plugins", "paths", true, c.plugins.paths);
  }
  if (YAML::Node n = root["logging"]; r.section(n, "logging", {"level"})) {
    r.get_choice(n, "logging", "level", {"trace", "debug", "info", "warn", "error", "critical", "off"},
                 c.logging.level);
  }
}

// Applies `a.b.c=value` to the tree; the value is parsed as YAML so lists work ("[a, b]"), with
// the same structural checks as a file; text that is not valid YAML is taken as a string.
void apply_override(YAML::Node& root, const std::string& key, const std::string& value) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream is(key);
  while (std::getline(is, part, '.')) parts.push_back(part);
  YAML::Node parsed;
  try {
    parsed = YAML::Load(value);
  } catch (const YAML::Exception&) {
    parsed = YAML::Node(value);
  }
  if (parsed.IsDefined() && !parsed.IsScalar()) parsed = load_yaml_checked(value, "--set " + key);
  if (parsed.IsNull() && !value.empty() && value != "null" && value != "~") parsed = YAML::Node(value);
  std::vector<YAML::Node> chain{root};
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node next = chain.back()[parts[i]];
    if (!next.IsMap()) {
      chain.back()[parts[i]] = YAML::Node(YAML::NodeType::Map);
      next = chain.back()[parts[i]];
    }
    chain.push_back(next);
  }
  chain.back()[parts.back()] = parsed;
}

EngineConfig load_node(YAML::Node root, const std::string& source, const fs::path& base_dir,
                       const Overrides& overrides) {
  std::set<std::string> overridden;
  if (!root.IsDefined() || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) throw Error(ErrorCode::kConfig, source + ": expected a YAML map at the top level");
  for (const auto& [k, v] : overrides) {
    apply_override(root, k, v);
    overridden.insert(k);
  }
  Reader r(source, base_dir, overridden);
  EngineConfig c;
  c.source_file = source;
  r.section(root, "", {"model", "speculative", "scheduler", "kv_cache", "server", "plugins", "logging"});
  read_model(r, root, c);
  read_speculative(r, root, c);
  resolve_sampler(r, root, c);
  read_rest(r, root, c);
  if (!r.errors().empty()) {
    std::string all;
    for (const auto& e : r.errors()) all += (all.empty() ? "" : "\n") + e;
    throw Error(ErrorCode::kConfig, all);
  }
  return c;
}

}  // namespace

bool valid_arm_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '-' && ch != '.') return false;
  return true;
}

std::pair<std::string, std::string> parse_override(const std::string& flag) {
  const size_t eq = flag.find('=');
  if (eq == std::string::npos || eq == 0)
    throw Error(ErrorCode::kInvalidArgument,
                "--set expects key=value (e.g. model.path=/models/x), got \"" + flag + "\"");
  const std::string key = flag.substr(0, eq);
  if (key.front() == '.' || key.back() == '.' || key.find("..") != std::string::npos)
    throw Error(ErrorCode::kInvalidArgument, "--set key \"" + key + "\" is not a dotted path like a.b.c");
  return {key, flag.substr(eq + 1)};
}

EngineConfig load_file(const fs::path& file, const Overrides& overrides) {
  std::string text;
  try {
    text = read_file_limited(file, kMaxConfigYamlBytes, "a config file");
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kNotFound) throw Error(ErrorCode::kNotFound, "cannot open config file " + file.string());
    throw Error(ErrorCode::kConfig, e.what());
  }
  const std::string source = file.string();
  return load_node(load_yaml_checked(text, source), source, file.parent_path(), overrides);
}

EngineConfig load_string(const std::string& yaml, const std::string& source_name, const Overrides& overrides) {
  return load_node(load_yaml_checked(yaml, source_name), source_name, {}, overrides);
}

EngineConfig for_model_dir(const std::string& model_dir, const Overrides& overrides) {
  Overrides all{{"model.path", model_dir}};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return load_node(YAML::Node(YAML::NodeType::Map), "<--model>", {}, all);
}

std::string summary(const EngineConfig& c) {
  std::ostringstream os;
  os << "config " << c.source_file << "\n";
  os << "  model:        " << c.model.path << " (dtype " << c.model.dtype << ", device " << c.model.device;
  if (c.model.max_model_len > 0) os << ", max_model_len " << c.model.max_model_len;
  if (c.model.tensor_parallel_size > 0) os << ", tensor_parallel_size " << c.model.tensor_parallel_size;
  os << ")\n";
  if (c.speculative.enabled) {
    os << "  speculative:  proposer " << c.speculative.proposer.name << ", verifier "
       << (c.speculative.arms.empty() ? c.speculative.verifier.name : "per arm") << ", scorer "
       << c.speculative.scorer.name << ", k = " << c.speculative.num_speculative_tokens
       << (c.speculative.dynamic
               ? " (dynamic: 0.." + std::to_string(c.speculative.num_speculative_tokens) + " per sequence and step)"
               : " (static)");
    if (c.speculative.disable_by_batch_size > 0) os << ", off above batch " << c.speculative.disable_by_batch_size;
    if (c.speculative.proposer_tensor_parallel_size > 0)
      os << ", proposer tensor_parallel_size " << c.speculative.proposer_tensor_parallel_size;
    os << "\n";
    for (const ArmConfig& a : c.speculative.arms) {
      const bool shadow =
          std::find(c.speculative.shadow.begin(), c.speculative.shadow.end(), a.name) != c.speculative.shadow.end();
      os << "  arm " << a.name << ":" << std::string(a.name.size() < 8 ? 8 - a.name.size() : 0, ' ') << " verifier "
         << a.verifier.name
         << ", k = " << (a.num_speculative_tokens > 0 ? a.num_speculative_tokens : c.speculative.num_speculative_tokens)
         << ", weight " << a.weight << (shadow ? ", shadow" : "") << "\n";
    }
    if (!c.speculative.ab_log.empty()) os << "  A/B log:      " << c.speculative.ab_log << "\n";
  } else {
    os << "  speculative:  off\n";
  }
  os << "  scheduler:    max_num_seqs " << c.scheduler.max_num_seqs << ", max_num_batched_tokens "
     << c.scheduler.max_num_batched_tokens << ", chunked_prefill " << (c.scheduler.chunked_prefill ? "on" : "off")
     << ", async_scheduling " << (c.scheduler.async_scheduling ? "on" : "off") << ", num_scheduler_steps "
     << c.scheduler.num_scheduler_steps << "\n";
  os << "  kv_cache:     block_size " << c.kv_cache.block_size << ", dtype " << c.kv_cache.dtype << ", memory "
     << (c.kv_cache.memory_mib > 0 ? std::to_string(c.kv_cache.memory_mib) + " MiB" : std::string("auto"))
     << ", prefix caching " << (c.kv_cache.prefix_caching ? "on" : "off") << "\n";
  os << "  server:       " << c.server.host << ":" << c.server.port
     << (c.server.api_keys.empty() && c.server.api_key_env.empty() ? "" : " (API keys on)") << "\n";
  os << "  logging:      " << c.logging.level << "\n";
  return os.str();
}

}  // namespace specd::config
