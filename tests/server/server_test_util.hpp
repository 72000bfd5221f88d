// Shared by the server test files: the tiny fixture model, a config writer and the fixture
// that starts one `specd serve` for a whole suite.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "fixture.hpp"
#include "http_client.hpp"
#include "server_process.hpp"

namespace specd::test {

using nlohmann::json;
namespace fs = std::filesystem;

inline const char* const kModel = "tiny";

inline fs::path work_dir() {
  return fs::path(SPECD_TEST_WORK_DIR) / "server";
}

inline fs::path tiny_dir() {
  fixture::Options o;
  o.preset = "tiny";
  static const fs::path dir = fixture::write(o, work_dir() / "tiny");
  return dir;
}

// A config for the tiny model; `extra` is appended YAML (server/scheduler overrides).
inline std::string write_config(const std::string& name, const std::string& server_extra,
                                const std::string& scheduler = "  max_num_seqs: 32\n  max_queue: 64\n",
                                int max_model_len = 256) {
  const fs::path file = work_dir() / (name + ".yaml");
  fs::create_directories(work_dir());
  std::ofstream(file) << "model:\n  path: " << tiny_dir().string() << "\n  max_model_len: " << max_model_len
                      << "\n  num_threads: 1\n"
                      << "scheduler:\n"
                      << scheduler << "kv_cache:\n  memory_mib: 32\n"
                      << "server:\n  model_name: " << kModel << "\n  max_body_bytes: 65536\n  max_tokens_limit: 2000\n"
                      << server_extra << "logging:\n  level: info\n";
  return file.string();
}

inline json completion(const std::string& prompt, int max_tokens, bool stream = false) {
  json j = {{"model", kModel}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
  if (stream) j["stream"] = true;
  return j;
}

class Server : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = std::make_unique<ServerProcess>(write_config("main", ""));
    ASSERT_TRUE(server_->ready()) << server_->log();
  }
  static void TearDownTestSuite() {
    if (server_) {
      EXPECT_EQ(server_->stop(std::chrono::seconds(30)), 0) << server_->log();
    }
    server_.reset();
  }
  void SetUp() override {
    if (!server_ || !server_->ready()) GTEST_SKIP() << "the server did not start";
  }
  static int port() { return server_->port(); }
  static HttpResponse post(const std::string& path, const json& body) {
    return http_call(port(), "POST", path, body.dump());
  }
  static inline std::unique_ptr<ServerProcess> server_;
};

}  // namespace specd::test
