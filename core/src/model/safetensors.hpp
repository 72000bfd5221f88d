// The safetensors container format (https://github.com/huggingface/safetensors):
//   [u64 little-endian N][N bytes of JSON header, space padded][tensor data]
// The header maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]} with
// offsets relative to the start of the data section, plus an optional "__metadata__" object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <vector>

#include "model/checkpoint.hpp"

namespace specd::model {

// Header lengths above this are refused as corrupt (the reference implementation's limit).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull * 1024 * 1024;

// Parses and validates the safetensors file `file` whose complete contents are
// [data, data + size). Returns one view per tensor, pointing into that memory, in header
// (name) order. Throws specd::Error naming `file`:
//   kModelFormat: file shorter than 8 bytes, header length past the end of the file,
//                 header not valid JSON or not an object, a malformed entry, data_offsets
//                 reversed, past the end of the data, mis-sized for dtype x shape, or
//                 overlapping another tensor;
//   kUnsupported: a dtype other than F32, F16, BF16 (the message names the tensor).
std::vector<TensorView> parse_safetensors(const std::byte* data, size_t size, const std::filesystem::path& file);

}  // namespace specd::model
