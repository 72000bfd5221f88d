// specd::Config and specd::ConfigBuilder (specd/config.hpp) over config::EngineConfig.
#include "config/config.hpp"

namespace specd {

std::string Config::summary() const {
  return config::summary(impl_->engine);
}

const std::string& Config::model_path() const {
  return impl_->engine.model.path;
}

ConfigBuilder ConfigBuilder::from_file(std::string path) {
  return {Source::kFile, std::move(path), ""};
}

ConfigBuilder ConfigBuilder::from_yaml(std::string yaml, std::string source_name) {
  return {Source::kYaml, std::move(yaml), std::move(source_name)};
}

ConfigBuilder ConfigBuilder::for_model(std::string model) {
  return {Source::kModel, std::move(model), ""};
}

ConfigBuilder& ConfigBuilder::set(std::string key, std::string value) {
  overrides_.emplace_back(std::move(key), std::move(value));
  return *this;
}

Config ConfigBuilder::build() const {
  switch (source_) {
    case Source::kFile:
      return config::load_file(text_, overrides_);
    case Source::kYaml:
      return config::load_string(text_, name_, overrides_);
    case Source::kModel:
      break;
  }
  return config::for_model_dir(text_, overrides_);
}

namespace config {

EngineConfig::operator specd::Config() const {
  return specd::Config(std::make_shared<const specd::Config::Impl>(specd::Config::Impl{*this}));
}

}  // namespace config
}  // namespace specd
