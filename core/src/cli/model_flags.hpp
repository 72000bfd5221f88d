// Flags shared by the commands that load a model (generate, score, bench): where the config
// comes from and `--set` overrides.
#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"

namespace CLI {
class App;
}

namespace specd::cli {

struct ModelFlags {
  std::string config_file;        // --config FILE
  std::string model_dir;          // --model DIR (documented defaults, no file)
  std::vector<std::string> sets;  // --set key=value, repeatable
};

// Adds --config, --model and --set to `cmd` (exactly one of --config / --model is required).
void add_model_flags(CLI::App& cmd, ModelFlags& flags);

// Loads the config (file or model directory plus overrides) and applies its log level.
config::EngineConfig load_engine_config(const ModelFlags& flags);

}  // namespace specd::cli
