// Subcommand registration. Each subcommand lives in its own cmd_<name>.cpp and adds itself to
// the app here; main.cpp only lists them. Only subcommands that work are registered.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace specd::cli {

// Global flags shared by every subcommand (set in main.cpp before a subcommand runs).
struct GlobalOptions {
  std::string log_level;  // --log-level; "" = config or SPECD_LOG_LEVEL or info
};
GlobalOptions& global_options();

// Applies the config's logging.level unless --log-level or SPECD_LOG_LEVEL was given
// (precedence: flag > environment > file). Call after loading a config.
void apply_config_log_level(const std::string& yaml_level);

void add_plugins_commands(CLI::App& app);   // specd plugins list [--json]
void add_validate_command(CLI::App& app);   // specd validate --config FILE
void add_tokenize_commands(CLI::App& app);  // specd tokenize / detokenize
void add_serve_command(CLI::App& app);      // specd serve --config FILE | --model DIR
void add_generate_command(CLI::App& app);   // specd generate (--config FILE | --model DIR) --prompt TEXT
void add_score_command(CLI::App& app);      // specd score (--config FILE | --model DIR) --prompt TEXT
void add_bench_command(CLI::App& app);      // specd bench (--config FILE | --model DIR)
void add_template_command(CLI::App& app);   // specd template render --model DIR --messages FILE
void add_inspect_command(CLI::App& app);    // specd inspect FILE|DIR [--json]
void add_ab_commands(CLI::App& app);        // specd ab run / specd ab report

}  // namespace specd::cli
