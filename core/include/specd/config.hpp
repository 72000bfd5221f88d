// An engine's configuration for embedders: the same YAML and the same validation as
// `specd serve --config` (every key is in docs/configuration.md).
//
//   specd::Config cfg = specd::ConfigBuilder::for_model("models/specd-py")
//                           .set("speculative.proposer.name", "ngram")
//                           .build();
//   specd::Engine engine(cfg);
//
// A Config is validated and immutable, and cheap to copy.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace specd {

class Config {
 public:
  // A one-screen summary of what the engine will load and run (`specd validate` prints it).
  std::string summary() const;
  // The model (directory or GGUF file) the configuration names.
  const std::string& model_path() const;

  // The validated configuration (core/src/config/): incomplete here, for specd's own code.
  struct Impl;
  const Impl& impl() const { return *impl_; }
  explicit Config(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<const Impl> impl_;
};

class ConfigBuilder {
 public:
  // A YAML file (docs/configuration.md).
  static ConfigBuilder from_file(std::string path);
  // YAML text; `source_name` stands for the file in error messages.
  static ConfigBuilder from_yaml(std::string yaml, std::string source_name = "<yaml>");
  // A model directory or GGUF file with every other setting at its documented default.
  static ConfigBuilder for_model(std::string model);

  // Sets one key by its dotted path, as `--set key=value` does (e.g. "scheduler.max_num_seqs",
  // "32"; lists and maps in YAML flow style: "[a, b]"). Applied before validation.
  ConfigBuilder& set(std::string key, std::string value);

  // Validates. Throws specd::Error (kConfig) listing every error found, one per line, each as
  // `file:line: path: message`.
  Config build() const;

 private:
  enum class Source { kFile, kYaml, kModel };
  ConfigBuilder(Source source, std::string text, std::string name)
      : source_(source), text_(std::move(text)), name_(std::move(name)) {}
  Source source_;
  std::string text_;  // the path, the YAML or the model
  std::string name_;
  std::vector<std::pair<std::string, std::string>> overrides_;
};

}  // namespace specd
