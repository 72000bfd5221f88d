// specd plugins list [--json] [--config FILE] [--plugin-path DIR]...
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "config/config.hpp"
#include "plugin/registry.hpp"

namespace specd::cli {
namespace {

struct PluginsListOptions {
  bool json = false;
  std::string config_file;
  std::vector<std::string> paths;
  std::vector<std::string> sets;
};

void run_plugins_list(const PluginsListOptions& o) {
  std::vector<std::string> yaml_paths = o.paths;
  if (!o.config_file.empty()) {
    config::Overrides overrides;
    for (const auto& s : o.sets) overrides.push_back(config::parse_override(s));
    const auto cfg = config::load_file(o.config_file, overrides);
    apply_config_log_level(cfg.logging.level);
    yaml_paths.insert(yaml_paths.end(), cfg.plugins.paths.begin(), cfg.plugins.paths.end());
  }
  const auto search = plugin::Registry::search_path(yaml_paths);
  plugin::Registry reg;
  reg.scan(search);

  if (o.json) {
    nlohmann::json out;
    out["search_path"] = nlohmann::json::array();
    for (const auto& p : search) out["search_path"].push_back(p.string());
    out["plugins"] = nlohmann::json::array();
    for (const auto* p : reg.plugins()) {
      nlohmann::json j{{"name", p->name},
                       {"version", p->version},
                       {"abi", std::to_string(p->abi_major) + "." + std::to_string(p->abi_minor)},
                       {"path", p->path.string()},
                       {"cuda_runtime_major", p->cuda_runtime_major},
                       {"components", nlohmann::json::array()}};
      for (const auto* c : reg.components())
        if (c->plugin == p) {
          const bool active = reg.find(c->kind, c->name) == c;
          j["components"].push_back({{"kind", std::string(plugin::kind_name(c->kind))},
                                     {"name", c->name},
                                     {"description", c->description},
                                     {"active", active}});
        }
      out["plugins"].push_back(j);
    }
    out["refused"] = nlohmann::json::array();
    for (const auto& r : reg.refusals()) out["refused"].push_back({{"path", r.path.string()}, {"reason", r.reason}});
    std::cout << out.dump(2) << "\n";
    return;
  }

  std::cout << "search path:\n";
  for (const auto& p : search) std::cout << "  " << p.string() << "\n";
  if (reg.plugins().empty()) std::cout << "no plugins found\n";
  for (const auto* p : reg.plugins()) {
    std::cout << "\n" << p->name << " " << p->version << "  (ABI " << p->abi_major << "." << p->abi_minor;
    if (p->cuda_runtime_major != 0) std::cout << ", CUDA " << p->cuda_runtime_major;
    std::cout << ")\n  " << p->path.string() << "\n";
    for (const auto* c : reg.components())
      if (c->plugin == p) {
        std::cout << "  " << plugin::kind_name(c->kind) << " " << c->name;
        if (reg.find(c->kind, c->name) != c) std::cout << " [shadowed]";
        if (!c->description.empty()) std::cout << " — " << c->description;
        std::cout << "\n";
      }
  }
  if (!reg.refusals().empty()) {
    std::cout << "\nrefused:\n";
    for (const auto& r : reg.refusals()) std::cout << "  " << r.reason << "\n";
  }
}

}  // namespace

void add_plugins_commands(CLI::App& app) {
  auto* plugins = app.add_subcommand("plugins", "Inspect plugins on the search path");
  plugins->require_subcommand(1);
  auto opts = std::make_shared<PluginsListOptions>();
  auto* list = plugins->add_subcommand("list", "List plugins: name, version, ABI, components and path");
  list->add_flag("--json", opts->json, "Machine-readable output");
  list->add_option("--config", opts->config_file, "Take plugins.paths from this config")->check(CLI::ExistingFile);
  list->add_option("--plugin-path", opts->paths, "Extra plugin directory, searched first (repeatable)");
  list->add_option("--set", opts->sets, "Override a config key: key=value (repeatable)");
  list->callback([opts] { run_plugins_list(*opts); });
}

}  // namespace specd::cli
