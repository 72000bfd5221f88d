// Reading the JSON files of a model directory (config.json, generation_config.json,
// model.safetensors.index.json) with errors that name the file.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <filesystem>

namespace specd::model {

// Parses `file`, which must hold a JSON object. Throws specd::Error: kNotFound ("<file>: cannot
// open") or kModelFormat ("<file>: invalid JSON: ..." / "<file>: top level is not a JSON object").
nlohmann::json read_json_file(const std::filesystem::path& file);

}  // namespace specd::model
