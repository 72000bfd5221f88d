// The out-of-tree example plugin, built with clang++ against the installed SDK, loaded by the
// g++-built engine: it must load, describe itself, validate its params and propose the right
// tokens.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "plugin/registry.hpp"
#include "specd/error.hpp"

namespace {

using specd::plugin::ComponentKind;
using specd::plugin::Params;
using specd::plugin::Registry;

std::vector<int32_t> propose(specd::plugin::ProposerInstance& p, const std::vector<std::vector<int32_t>>& seqs,
                             const std::vector<int32_t>& k, std::vector<int32_t>* counts) {
  const int32_t k_max = *std::max_element(k.begin(), k.end());
  std::vector<specd_sequence> raw(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) {
    raw[i].struct_size = sizeof(specd_sequence);
    raw[i].seq_id = i;
    raw[i].tokens = {seqs[i].data(), static_cast<int64_t>(seqs[i].size())};
    raw[i].num_prompt = static_cast<int64_t>(seqs[i].size());
  }
  std::vector<int32_t> drafts(seqs.size() * static_cast<size_t>(k_max), -1);
  counts->assign(seqs.size(), 0);
  specd_propose_batch b{};
  b.struct_size = sizeof(b);
  b.num_seqs = static_cast<int32_t>(seqs.size());
  b.seqs = raw.data();
  b.max_draft = k.data();
  b.k_max = k_max;
  b.vocab_size = 32000;
  b.draft_tokens = drafts.data();
  b.num_drafted = counts->data();
  p.propose(b);
  return drafts;
}

TEST(SdkExample, LoadsAndProposesTheOneGramContinuation) {
  Registry reg;
  const auto& info = reg.load(SPECD_EXAMPLE_PLUGIN);
  EXPECT_EQ(info.name, "onegram");
  EXPECT_EQ(info.version, "1.0.0");
  auto p = reg.create_proposer("onegram", Params());
  EXPECT_FALSE(p->capabilities().produces_draft_probs);

  std::vector<int32_t> counts;
  // Sequence 0: last token 5 occurred at 0, followed by 7 9 4 5. Sequence 1: the last token 8
  // never occurred before → no draft. Sequence 2: the most recent earlier occurrence of 2
  // (index 3, followed by 6 6 2) wins over index 0 (followed by 1 3 2).
  // Sequence 3: k = 0 → no draft.
  const auto d = propose(*p, {{5, 7, 9, 4, 5}, {1, 2, 3, 8}, {2, 1, 3, 2, 6, 6, 2}, {5, 5, 5}}, {3, 3, 3, 0}, &counts);
  EXPECT_EQ(counts, (std::vector<int32_t>{3, 0, 3, 0}));
  EXPECT_EQ(std::vector<int32_t>(d.begin(), d.begin() + 3), (std::vector<int32_t>{7, 9, 4}));
  EXPECT_EQ(d[3], -1);
  EXPECT_EQ(std::vector<int32_t>(d.begin() + 6, d.begin() + 9), (std::vector<int32_t>{6, 6, 2}));
}

TEST(SdkExample, ParamsAreValidatedWithTheSdkHelpers) {
  Registry reg;
  reg.load(SPECD_EXAMPLE_PLUGIN);
  const Params bad =
      Params::from_yaml(YAML::Load("name: onegram\nmax_lookback: -1\ncolor: 1\n"), "ab.yaml", "speculative.proposer");
  try {
    reg.validate(ComponentKind::kProposer, "onegram", bad);
    FAIL();
  } catch (const specd::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("ab.yaml:2: speculative.proposer.max_lookback: expected integer in [0, 1073741824], got \"-1\""),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("ab.yaml:3: speculative.proposer.color: unknown key"), std::string::npos) << msg;
  }
  // max_lookback bounds the search: 5 at distance 4 is out of a lookback of 2.
  auto p = reg.create_proposer("onegram", Params::from_pairs({{"max_lookback", "2"}}));
  std::vector<int32_t> counts;
  propose(*p, {{5, 7, 9, 4, 5}}, {3}, &counts);
  EXPECT_EQ(counts[0], 0);
}

TEST(SdkExample, SpecdPluginsListShowsIt) {
  const std::string dir = std::filesystem::path(SPECD_EXAMPLE_PLUGIN).parent_path().string();
  FILE* pipe = popen((std::string(SPECD_CLI_PATH) + " plugins list --plugin-path " + dir + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  EXPECT_EQ(pclose(pipe), 0) << out;
  const std::string abi = "(ABI " + std::to_string(SPECD_ABI_MAJOR) + "." + std::to_string(SPECD_ABI_MINOR) + ")";
  EXPECT_NE(out.find("onegram 1.0.0  " + abi), std::string::npos) << out;
  EXPECT_NE(out.find("proposer onegram"), std::string::npos) << out;
}

}  // namespace
