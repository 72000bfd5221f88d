// Reading the JSON files of a model directory (config.json, generation_config.json,
// model.safetensors.index.json) with errors that name the file.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <filesystem>

#include "common/untrusted.hpp"

namespace specd::model {

// Parses `file`, which must be a regular file of at most `max_bytes` holding a JSON object
// nested at most kMaxJsonDepth deep. Throws specd::Error: kNotFound ("<file>: cannot open") or
// kModelFormat ("<file>: invalid JSON: ..." / "<file>: top level is not a JSON object" / "<file>:
// not a regular file" / "<file>: N bytes, more than the M-byte limit ...").
nlohmann::json read_json_file(const std::filesystem::path& file, uint64_t max_bytes = kMaxSmallJsonBytes);

}  // namespace specd::model
