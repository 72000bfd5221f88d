// specd-to-gguf: converts a Hugging Face checkpoint directory into a GGUF file (convert.hpp).
//   specd-to-gguf --model /work/models/llama-160m --out llama-160m-f32.gguf --type f32
//   specd-to-gguf --model /work/models/llama-160m --out draft2-bf16.gguf --type bf16 --layers 2
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <string>

#include "convert.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Convert a Hugging Face checkpoint directory (config.json, safetensors, tokenizer.json) to GGUF v3."};
  std::string model_dir;
  std::string out_file;
  std::string type = "f32";
  specd::gguf::ConvertOptions options;
  app.add_option("--model", model_dir, "checkpoint directory")->required();
  app.add_option("--out", out_file, "GGUF file to write (replaced if it exists)")->required();
  app.add_option(
         "--type", type,
         "type of the 2-D tensors: f32, f16, bf16, q8_0, q4_0, q2_k, q3_k, q4_k, q5_k or q6_k (1-D tensors stay f32; "
         "quantized, the embeddings and LM head are f16)")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0", "q4_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"}))
      ->capture_default_str();
  app.add_option("--layers", options.layers, "write only the first N decoder layers (0: all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--name", options.name, "general.name (default: the directory's name)");
  CLI11_PARSE(app, argc, argv);
  try {
    options.type = specd::gguf::parse_tensor_type(type);
    const specd::gguf::ConvertSummary s = specd::gguf::convert_checkpoint(model_dir, out_file, options);
    std::printf(
        "%s: %s, %lld layers, %s tokenizer (%lld tokens), %zu tensors (%s), %zu checkpoint tensors not "
        "written, %llu bytes\n",
        out_file.c_str(), s.architecture.c_str(), static_cast<long long>(s.layers), s.tokenizer_model.c_str(),
        static_cast<long long>(s.vocab), s.tensors, type.c_str(), s.skipped_tensors,
        static_cast<unsigned long long>(s.file_bytes));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "specd-to-gguf: error: %s\n", e.what());
    return 1;
  }
}
