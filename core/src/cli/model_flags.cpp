#include "cli/model_flags.hpp"

#include <CLI/CLI.hpp>

#include "cli/commands.hpp"
#include "specd/error.hpp"

namespace specd::cli {

void add_model_flags(CLI::App& cmd, ModelFlags& flags) {
  auto* config = cmd.add_option("--config", flags.config_file, "engine YAML file")->check(CLI::ExistingFile);
  auto* model =
      cmd.add_option("--model", flags.model_dir,
                     "Hugging Face model directory or GGUF file (instead of --config; defaults for the rest)");
  config->excludes(model);
  model->excludes(config);
  cmd.add_option("--set", flags.sets, "override a config key, e.g. --set kv_cache.block_size=32 (repeatable)");
}

config::EngineConfig load_engine_config(const ModelFlags& flags) {
  config::Overrides overrides;
  for (const auto& s : flags.sets) overrides.push_back(config::parse_override(s));
  if (flags.config_file.empty() && flags.model_dir.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "one of --config FILE or --model DIR|FILE.gguf is required");
  }
  config::EngineConfig cfg = flags.config_file.empty() ? config::for_model_dir(flags.model_dir, overrides)
                                                       : config::load_file(flags.config_file, overrides);
  apply_config_log_level(cfg.logging.level);
  return cfg;
}

}  // namespace specd::cli
