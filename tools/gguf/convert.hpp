// Hugging Face checkpoint directory -> GGUF file that llama.cpp loads.
//
// Reads the directory with the engine's own readers (model::Checkpoint for config.json and the
// safetensors, tokenizer::Tokenizer for tokenizer.json + tokenizer_config.json) and writes:
//   - general.* and <arch>.* hyper-parameters (arch "llama" for Llama and Mistral, "qwen2",
//     "qwen3");
//   - tokenizer.ggml.*: model "llama" (SentencePiece-style BPE with byte_fallback: tokens,
//     scores, token types, add_space_prefix) or "gpt2" (byte-level BPE: tokens, merges, token
//     types, pre-tokenizer name), BOS/EOS/UNK/PAD ids, add-BOS/EOS flags, the chat template;
//   - the tensors under llama.cpp's names. For arch "llama" the Q/K projection rows are
//     permuted within each head from rotate-half order to interleaved pairs, as llama.cpp's
//     convert_hf_to_gguf.py does, so llama.cpp's RoPE computes the same function as specd.
//     Llama 3 rope scaling becomes the rope_freqs.weight tensor, linear scaling metadata.
//   - tensor types F32, F16, BF16 (narrowed with round to nearest even), Q8_0 and Q4_0
//     (quantized with kernels::from_f32, byte for byte GGUF's reference quantizers). With a
//     quantized type the token embeddings and the LM head are written F16, exactly as specd
//     keeps them when it quantizes at load, so the file runs the same numbers as the
//     checkpoint loaded with model.dtype q8_0 / q4_0.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "gguf_writer.hpp"

namespace specd::gguf {

struct ConvertOptions {
  TensorType type = TensorType::kF32;  // 2-D tensors; 1-D ones (norms, biases) are always F32
  int64_t layers = 0;                  // 0: every decoder layer; N: only the first N (a self-draft)
  std::string name;                    // general.name; empty: the model directory's name
};

struct ConvertSummary {
  std::string architecture;     // "llama", "qwen2" or "qwen3"
  std::string tokenizer_model;  // "llama" or "gpt2"
  int64_t layers = 0;
  int64_t vocab = 0;
  size_t tensors = 0;
  size_t skipped_tensors = 0;  // checkpoint tensors not written (other layers, mtp.*)
  uint64_t file_bytes = 0;
};

// Throws specd::Error naming the file, field or tensor: what the checkpoint readers throw, plus
// kInvalidArgument for --layers out of range, kUnsupported for a tokenizer or rope scaling that
// has no GGUF form here.
ConvertSummary convert_checkpoint(const std::filesystem::path& model_dir, const std::filesystem::path& out_file,
                                  const ConvertOptions& options);

// Adds the tokenizer.* metadata for the tokenizer in model_dir, padded to n_vocab tokens
// (the embedding rows; ids without a token become "[PAD<id>]", type unused). Returns the
// tokenizer.ggml.model value.
std::string add_vocab(Writer& writer, const std::filesystem::path& model_dir, int64_t n_vocab);

// The HF row stored at GGUF row `row` of a permuted Q/K projection: within each head of
// head_dim rows, GGUF row 2i + j holds HF row j * head_dim / 2 + i.
int64_t rope_source_row(int64_t row, int64_t head_dim);

}  // namespace specd::gguf
