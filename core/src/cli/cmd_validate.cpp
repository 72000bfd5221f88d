// specd validate --config FILE [--set key=value]...
// Validates the config schema, then each named plugin component's own parameters. Exit 0 with
// a summary, or non-zero with every error found.
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "config/config.hpp"
#include "plugin/registry.hpp"
#include "specd/error.hpp"

namespace specd::cli {
namespace {

struct ValidateOptions {
  std::string config_file;
  std::vector<std::string> sets;
};

void run_validate(const ValidateOptions& o) {
  config::Overrides overrides;
  for (const auto& s : o.sets) overrides.push_back(config::parse_override(s));
  const config::EngineConfig cfg = config::load_file(o.config_file, overrides);
  apply_config_log_level(cfg.logging.level);

  std::vector<std::string> errors;
  if (cfg.speculative.enabled) {
    plugin::Registry reg;
    reg.scan(plugin::Registry::search_path(cfg.plugins.paths));
    auto check = [&](plugin::ComponentKind kind, const config::ComponentConfig& comp) {
      try {
        reg.validate(kind, comp.name, comp.params);
      } catch (const Error& e) {
        const std::string what = e.what();
        // Plugin messages already carry file:line: path; a missing component does not.
        if (e.code() == ErrorCode::kNotFound)
          errors.push_back(cfg.source_file + ":" + std::to_string(comp.line) + ": " + comp.params.raw()->path +
                           ".name: " + what);
        else
          errors.push_back(what);
      }
    };
    check(plugin::ComponentKind::kProposer, cfg.speculative.proposer);
    check(plugin::ComponentKind::kVerifier, cfg.speculative.verifier);
    if (cfg.speculative.scorer.name != "mqa") check(plugin::ComponentKind::kScorer, cfg.speculative.scorer);
  }
  if (!errors.empty()) {
    std::string all;
    for (const auto& e : errors) all += (all.empty() ? "" : "\n") + e;
    throw Error(ErrorCode::kConfig, all);
  }
  std::cout << config::summary(cfg) << "valid\n";
}

}  // namespace

void add_validate_command(CLI::App& app) {
  auto opts = std::make_shared<ValidateOptions>();
  auto* cmd = app.add_subcommand("validate", "Check a config file and the parameters of the plugins it names");
  cmd->add_option("--config", opts->config_file, "YAML config file")->required();
  cmd->add_option("--set", opts->sets, "Override a config key: key=value (repeatable)");
  cmd->callback([opts] { run_validate(*opts); });
}

}  // namespace specd::cli
