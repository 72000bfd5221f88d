// The plugin registry: finds plugin libraries on the search path, checks them against the
// ABI, and creates components by name, wrapped in the host-side instances of instance.hpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "plugin/host_services.hpp"
#include "plugin/instance.hpp"
#include "plugin/params.hpp"
#include "specd/sdk/abi.h"

namespace specd::plugin {

enum class ComponentKind {
  kProposer = SPECD_COMPONENT_PROPOSER,
  kScorer = SPECD_COMPONENT_SCORER,
  kVerifier = SPECD_COMPONENT_VERIFIER
};
std::string_view kind_name(ComponentKind kind);

class LoadedLibrary;  // the open shared library (Boost.DLL), private to registry.cpp

struct PluginInfo {
  std::filesystem::path path;
  std::string name;
  std::string version;
  uint32_t abi_major = 0;
  uint32_t abi_minor = 0;
  int32_t cuda_runtime_major = 0;
};

struct ComponentInfo {
  std::string name;
  ComponentKind kind;
  std::string description;
  const PluginInfo* plugin;          // owned by the registry
  const specd_component_desc* desc;  // owned by the plugin library
};

// A plugin file that was refused, with the reason (already names the file).
struct Refusal {
  std::filesystem::path path;
  std::string reason;
};

// Components shadowed by an earlier search-path entry with the same name.
struct Shadowed {
  std::string name;
  ComponentKind kind;
  std::filesystem::path winner;
  std::filesystem::path loser;
};

class Registry {
 public:
  // The search path, in priority order: YAML `plugins.paths`, then SPECD_PLUGIN_PATH
  // (colon-separated), then the built-in directory next to the running binary
  // (<bin>/../lib/specd/plugins).
  static std::vector<std::filesystem::path> search_path(const std::vector<std::string>& yaml_paths);
  static std::filesystem::path builtin_dir();

  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Loads every *.so in each directory (non-recursive, sorted by name). Refused files (not
  // loadable, not a regular file, a symlink loop, ...) are recorded in refusals(); the scan
  // itself only throws for an unreadable directory.
  void scan(const std::vector<std::filesystem::path>& dirs);
  // Loads one plugin file; throws specd::Error (kPluginLoad) naming the file and the reason.
  const PluginInfo& load(const std::filesystem::path& file);

  const std::vector<const PluginInfo*>& plugins() const { return plugin_list_; }
  const std::vector<Refusal>& refusals() const { return refusals_; }
  const std::vector<Shadowed>& shadowed() const { return shadowed_; }
  std::vector<const ComponentInfo*> components() const;
  const ComponentInfo* find(ComponentKind kind, std::string_view name) const;

  // Validates a component's parameters (its validate entry, or create + destroy when it has
  // none). Throws specd::Error with every message the plugin reported.
  void validate(ComponentKind kind, std::string_view name, const Params& params) const;

  // Create instances; throw specd::Error when the name is unknown (listing the names that
  // exist and any refused files) or the factory fails.
  std::unique_ptr<ProposerInstance> create_proposer(std::string_view name, const Params& params,
                                                    ModelBinding models = {}) const {
    return std::make_unique<ProposerInstance>(create(ComponentKind::kProposer, name, params, models));
  }
  // A bare table whose functions keep their own state (tests' fake model services).
  std::unique_ptr<ProposerInstance> create_proposer(std::string_view name, const Params& params,
                                                    const specd_model_services* models) const {
    return create_proposer(name, params, ModelBinding{models, nullptr});
  }
  std::unique_ptr<VerifierInstance> create_verifier(std::string_view name, const Params& params) const {
    return std::make_unique<VerifierInstance>(create(ComponentKind::kVerifier, name, params, {}));
  }
  std::unique_ptr<ScorerInstance> create_scorer(std::string_view name, const Params& params,
                                                ModelBinding models = {}) const {
    return std::make_unique<ScorerInstance>(create(ComponentKind::kScorer, name, params, models));
  }

 private:
  const ComponentInfo& require(ComponentKind kind, std::string_view name) const;
  // Runs the component's factory with a fresh host context; throws specd::Error(kPluginLoad).
  CreatedComponent create(ComponentKind kind, std::string_view name, const Params& params, ModelBinding models) const;

  std::vector<std::unique_ptr<LoadedLibrary>> libraries_;
  std::vector<std::unique_ptr<PluginInfo>> plugin_store_;
  std::vector<const PluginInfo*> plugin_list_;
  std::vector<std::unique_ptr<ComponentInfo>> component_store_;
  std::map<std::pair<int, std::string>, const ComponentInfo*, std::less<>> by_name_;
  void refuse_file(const std::filesystem::path& file, const std::string& reason);
  // Registry::load's steps: the components of a descriptor checked, then the plugin registered.
  // `file` is the resolved path, `name` the path as given (messages name it).
  void check_components(const specd_plugin_descriptor& desc, const std::filesystem::path& file,
                        const std::filesystem::path& name) const;
  const PluginInfo& add(const specd_plugin_descriptor& desc, const std::filesystem::path& file,
                        std::unique_ptr<LoadedLibrary> lib);
  std::vector<Refusal> refusals_;
  std::vector<Shadowed> shadowed_;
};

}  // namespace specd::plugin
