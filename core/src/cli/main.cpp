// specd: the command-line entry point. Subcommands register themselves (commands.hpp);
// errors from any of them are printed as one clean message and a non-zero exit, never a
// crash.
#include <malloc.h>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "dist/session.hpp"
#include "specd/error.hpp"
#include "specd/kernels/device.hpp"
#include "specd/log.hpp"
#include "specd/sdk/abi.h"
#include "tp/model_factory.hpp"

namespace specd::cli {

GlobalOptions& global_options() {
  static GlobalOptions options;
  return options;
}

void apply_config_log_level(const std::string& yaml_level) {
  const char* env = std::getenv("SPECD_LOG_LEVEL");
  if (!global_options().log_level.empty() || (env != nullptr && *env != '\0')) return;
  log::set_level(log::parse_level(yaml_level));
}

namespace {
std::string version_text() {
  std::string text = std::string("specd ") + SPECD_VERSION + " (plugin ABI " + std::to_string(SPECD_ABI_MAJOR) + "." +
                     std::to_string(SPECD_ABI_MINOR) + ", CUDA ";
#ifdef SPECD_WITH_CUDA
  // The runtime and architectures built in; the device only where one is present (the
  // model runtime does not run on it yet: docs/cuda.md).
  text += kernels::cuda_build_text();
  if (kernels::device_available(kernels::Device::kCuda))
    text += "; device " + kernels::device_description(kernels::Device::kCuda);
  text += ")";
#else
  text += "not built)";
#endif
  return text;
}
}  // namespace

}  // namespace specd::cli

namespace {

int run(int argc, char** argv) {
  using namespace specd;
  // Under mpirun (docs/distributed.md) rank 0 runs the command and ranks 1..N-1 hold the other
  // shards of the models it loads; without a launcher this is a one-rank session and MPI is
  // never initialized.
  std::unique_ptr<dist::Session> session;
  try {
    session = std::make_unique<dist::Session>(&argc, &argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "specd: error: %s\n", e.what());
    return 1;
  }
  if (!session->leader()) return tp::follow(*session);

  CLI::App app{"specd: a speculative-decoding inference engine", "specd"};
  app.require_subcommand(1);
  app.set_version_flag("--version", cli::version_text());
  app.add_option("--log-level", cli::global_options().log_level,
                 "trace|debug|info|warn|error|critical|off (overrides config and SPECD_LOG_LEVEL)");
  app.parse_complete_callback([] {
    if (!cli::global_options().log_level.empty())
      log::set_level(log::parse_level(cli::global_options().log_level));
    else
      log::apply_env_level();
  });

  cli::add_plugins_commands(app);
  cli::add_validate_command(app);
  cli::add_tokenize_commands(app);
  cli::add_generate_command(app);
  cli::add_score_command(app);
  cli::add_bench_command(app);
  cli::add_serve_command(app);
  cli::add_template_command(app);
  cli::add_inspect_command(app);
  cli::add_ab_commands(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const specd::Error& e) {
    std::fprintf(stderr, "specd: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "specd: error: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Blocks of 1 MiB and more are mapped on their own and returned to the system when freed.
  // glibc's default raises this threshold to the size of each large block freed (up to 32 MiB),
  // after which such blocks come from the arena of the thread that made them and stay resident:
  // a server whose requests render or tokenize large inputs on different threads then held each
  // thread's high-water mark at once (three failed 60 MB template renders: 62 -> 177 MB of RSS).
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // set-up before the command runs, or a follower rank's loop
    std::fprintf(stderr, "specd: error: %s\n", e.what());
    return 1;
  }
}
