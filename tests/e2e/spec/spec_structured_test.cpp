// Structured output under speculation (docs/structured-output.md): with a JSON Schema, a regex,
// a choice list or a GBNF grammar, every proposer (and both verifiers at temperature 0) emits
// exactly the tokens plain constrained decoding emits, in every scheduling mode and with n > 1;
// every finished output is a sentence of its constraint; and sampled constrained output follows
// the same distribution with and without speculation (chi-square, with a negative control).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "chi_square.hpp"
#include "constrain/constraint.hpp"
#include "constrain/grammar.hpp"
#include "constrain/matcher.hpp"
#include "spec_test_util.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/tokenizer_impl.hpp"

namespace {

using specd::Request;
using specd::StructuredOutput;
using specd::spec_test::Generation;
using specd::spec_test::run_engine;
using Kind = specd::StructuredOutput::Kind;

StructuredOutput make(Kind kind, std::string spec, std::vector<std::string> choices = {}) {
  StructuredOutput so;
  so.kind = kind;
  so.spec = std::move(spec);
  so.choices = std::move(choices);
  return so;
}

// Constraints whose sentences are short enough to finish within the requests' max_tokens.
std::vector<StructuredOutput> constraints() {
  return {
      make(Kind::kRegex, "[a-z]{1,6}@[a-z]{2,4}\\.(com|org)"),
      make(Kind::kJsonSchema, R"({"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 6},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3}},
          "required": ["name", "age", "tags"], "additionalProperties": false})"),
      make(Kind::kChoice, "", {"yes", "no", "maybe not", "it depends"}),
      make(Kind::kGrammar, "root ::= \"(\" expr \")\"\nexpr ::= [0-9]{1,3} ([+*] [0-9]{1,3}){0,3}"),
  };
}

std::vector<Request> constrained_requests(int copies, bool sampled) {
  std::vector<Request> out;
  const std::vector<StructuredOutput> cs = constraints();
  std::vector<Request> base = specd::spec_test::mixed_requests(copies * static_cast<int>(cs.size()), 77);
  for (size_t i = 0; i < base.size(); ++i) {
    Request r = base[i];
    r.structured = cs[i % cs.size()];
    r.sampling.max_tokens = 64;
    r.sampling.ignore_eos = false;
    if (sampled) {
      r.sampling.temperature = 1.0f;
      r.sampling.seed = 5000 + i;
    }
    out.push_back(std::move(r));
  }
  return out;
}

// The bytes the grammar saw: each token's bytes mid-sequence.
std::string text_of(const specd::Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::string s;
  for (const int32_t id : ids) s += tok.impl().token_bytes(id);
  return s;
}

void expect_valid(const specd::Tokenizer& tok, const Request& r, const Generation& g) {
  ASSERT_TRUE(g.error.empty()) << g.error;
  const auto grammar = specd::constrain::compile_structured(r.structured);
  std::vector<int32_t> ids = g.tokens;
  const bool eos = !ids.empty() && ids.back() == tok.eos_id();
  if (eos) ids.pop_back();
  const std::string text = text_of(tok, ids);
  specd::constrain::Matcher m(grammar);
  ASSERT_TRUE(m.accept(text)) << "not a prefix of the constraint's language: '" << text << "'";
  if (g.finish_reason == specd::FinishReason::kStop) {
    EXPECT_TRUE(m.can_end()) << "finished but incomplete: '" << text << "'";
    if (r.structured.kind == Kind::kJsonSchema) {
      EXPECT_TRUE(nlohmann::json::accept(text)) << text;
    }
  }
}

struct Case {
  std::string proposer;
  std::string verifier;
  bool tree = false;  // draft_model drafting a tree (depth 3, top 2): the host prunes forbidden nodes
};

class StructuredSpec : public testing::TestWithParam<Case> {};

TEST_P(StructuredSpec, GreedyOutputIsTheSameAndValid) {
  const Case& c = GetParam();
  const bool ngram = c.proposer == "ngram" || c.proposer == "suffix";
  const auto target = specd::spec_test::target_fixture(c.proposer == "mtp", ngram ? 0.004 : 0.02);
  const auto tok = specd::Tokenizer::load(target);
  const std::vector<Request> requests = constrained_requests(2, false);
  const std::vector<Generation> plain = run_engine(specd::config::for_model_dir(target.string()), requests);
  int finished = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    expect_valid(*tok, requests[i], plain[i]);
    finished += plain[i].finish_reason == specd::FinishReason::kStop;
  }
  EXPECT_GE(finished, 4) << "most constrained outputs should complete within 64 tokens";
  for (const specd::spec_test::Mode mode : specd::spec_test::kModes) {
    specd::spec::SpecMetrics metrics;
    specd::config::Overrides extra = specd::spec_test::scheduling(mode);
    if (c.tree) {
      extra.push_back({"speculative.proposer.tree.depth", "3"});
      extra.push_back({"speculative.proposer.tree.top_k", "2"});
    }
    const std::vector<Generation> spec = run_engine(
        specd::spec_test::spec_config(target, c.proposer, c.verifier, c.tree ? 6 : 3, extra), requests, &metrics);
    ASSERT_EQ(spec.size(), plain.size());
    for (size_t i = 0; i < plain.size(); ++i) {
      EXPECT_EQ(spec[i].tokens, plain[i].tokens) << specd::spec_test::mode_name(mode) << ", request " << i;
      EXPECT_EQ(spec[i].finish_reason, plain[i].finish_reason) << specd::spec_test::mode_name(mode);
      expect_valid(*tok, requests[i], spec[i]);
    }
    if (c.proposer != "ngram" && c.proposer != "suffix") {
      EXPECT_GT(metrics.accepted_tokens, 0u) << metrics.summary();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllProposers, StructuredSpec,
                         testing::Values(Case{"ngram", "greedy"}, Case{"suffix", "greedy"},
                                         Case{"draft_model", "greedy"}, Case{"draft_model", "rejection"},
                                         Case{"mtp", "rejection"}, Case{"draft_model", "greedy", true},
                                         Case{"draft_model", "rejection", true}),
                         [](const testing::TestParamInfo<Case>& i) {
                           return i.param.proposer + "_" + i.param.verifier + (i.param.tree ? "_tree" : "");
                         });

// n > 1: each choice keeps its own grammar state.
TEST(StructuredSpecChoices, EveryChoiceIsValid) {
  const auto target = specd::spec_test::target_fixture(false, 0.02);
  const auto tok = specd::Tokenizer::load(target);
  Request r = constrained_requests(1, true)[1];  // the JSON Schema, sampled
  r.n = 4;
  specd::spec::SpecMetrics metrics;
  auto engine = std::make_unique<specd::Engine>(specd::spec_test::spec_config(target, "draft_model", "rejection", 3));
  const specd::RequestId id = specd::spec_test::add_request(*engine, r);
  std::map<int32_t, Generation> out;
  while (engine->has_unfinished()) {
    for (const specd::RequestOutput& o : engine->step()) {
      ASSERT_EQ(o.id, id);
      Generation& g = out[o.index];
      g.tokens.insert(g.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      if (o.finish_reason != specd::FinishReason::kNone) g.finish_reason = o.finish_reason;
      g.error += o.error;
    }
  }
  ASSERT_EQ(out.size(), 4u);
  for (const auto& [index, g] : out) expect_valid(*tok, r, g);
  EXPECT_NE(out[0].tokens, out[1].tokens) << "choices draw from their own seeds";
}

// The draft model asks the host which tokens the grammar allows (ABI 1.5 allowed_tokens) and
// drafts only those: the host never has to cut one of its drafts, and most are accepted.
TEST(StructuredSpecDrafts, TheDraftModelDraftsOnlyAllowedTokens) {
  const auto target = specd::spec_test::target_fixture(false, 0.004);
  auto engine = std::make_unique<specd::Engine>(specd::spec_test::spec_config(target, "draft_model", "greedy", 4));
  for (const Request& r : constrained_requests(2, false)) specd::spec_test::add_request(*engine, r);
  while (engine->has_unfinished()) {
    for (const specd::RequestOutput& o : engine->step()) ASSERT_TRUE(o.error.empty()) << o.error;
  }
  const specd::EngineStats s = engine->stats();
  EXPECT_EQ(s.structured_requests, 8u);
  EXPECT_EQ(s.grammar_cut_drafts, 0u);
  EXPECT_GT(s.grammar_masks_computed, 0u);
  const specd::spec::SpecMetrics m = engine->spec_metrics();
  EXPECT_GT(m.acceptance_rate(), 0.5) << m.summary();
}

// Text the grammar forces (the closing of a bounded regex, a JSON key) becomes drafts when the
// proposer leaves room: tokens of it by longest match, which the verifier judges like any draft
// (the random fixture often prefers another split of the same text: acceptance is not asserted,
// the output is the plain one).
TEST(StructuredSpecDrafts, ForcedTextBecomesDrafts) {
  const auto target = specd::spec_test::target_fixture(false, 0.02);
  std::vector<Request> requests = constrained_requests(1, false);
  requests[0].structured = make(Kind::kRegex, "[a-z]{1,3}=ABCDEFGHIJ;");
  const std::vector<Request> one(requests.begin(), requests.begin() + 1);
  const std::vector<Generation> plain = run_engine(specd::config::for_model_dir(target.string()), one);
  auto engine = std::make_unique<specd::Engine>(specd::spec_test::spec_config(target, "ngram", "greedy", 4));
  specd::spec_test::add_request(*engine, requests[0]);
  std::vector<int32_t> tokens;
  while (engine->has_unfinished()) {
    for (const specd::RequestOutput& o : engine->step())
      tokens.insert(tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
  }
  EXPECT_GE(engine->stats().grammar_forced_drafts, 3u);
  EXPECT_EQ(tokens, plain[0].tokens);
}

// Bad constraints fail their request with the reason, and the engine goes on.
TEST(StructuredSpecErrors, ABadConstraintFailsOnlyItsRequest) {
  const auto target = specd::spec_test::target_fixture(false, 0.02);
  std::vector<Request> requests = constrained_requests(1, false);
  requests[0].structured = make(Kind::kGrammar, "root ::= root \"a\" | \"b\"");
  requests[2].structured = make(Kind::kJsonSchema, R"({"type": "string", "not": {"const": "x"}})");
  const std::vector<Generation> gens =
      run_engine(specd::spec_test::spec_config(target, "draft_model", "greedy", 3), requests);
  EXPECT_NE(gens[0].error.find("left-recursive"), std::string::npos) << gens[0].error;
  EXPECT_NE(gens[2].error.find("not"), std::string::npos) << gens[2].error;
  EXPECT_TRUE(gens[1].error.empty()) << gens[1].error;
  EXPECT_TRUE(gens[3].error.empty()) << gens[3].error;
}

// The first two tokens of sampled constrained output: the same distribution with speculation
// (rejection sampling over the masked target) as without; a lossy verifier (greedy at
// temperature 1 accepts only argmax drafts and so shifts mass) is the negative control.
std::map<std::pair<int, int>, int> first_pairs(const specd::config::EngineConfig& cfg, int runs) {
  std::vector<Request> requests;
  for (int i = 0; i < runs; ++i) {
    Request r = constrained_requests(1, true)[3];  // the arithmetic grammar
    r.sampling.seed = 100000 + static_cast<uint64_t>(i);
    r.sampling.max_tokens = 3;
    requests.push_back(std::move(r));
  }
  std::map<std::pair<int, int>, int> counts;
  for (const Generation& g : run_engine(cfg, requests)) {
    if (g.tokens.size() >= 3) ++counts[{g.tokens[1], g.tokens[2]}];
  }
  return counts;
}

TEST(StructuredSpecSampling, ConstrainedDistributionIsUnchanged) {
  const auto target = specd::spec_test::target_fixture(false, 0.02);
  constexpr int kRuns = 1500;
  const auto plain = first_pairs(specd::config::for_model_dir(target.string()), kRuns);
  const auto spec = first_pairs(specd::spec_test::spec_config(target, "draft_model", "rejection", 3), kRuns);
  const auto lossy = first_pairs(specd::spec_test::spec_config(target, "draft_model", "greedy", 3), kRuns);
  const double p = specd::spec_test::homogeneity_p_value(plain, spec);
  EXPECT_GT(p, 1e-3) << "rejection sampling changed the constrained distribution";
  EXPECT_LT(specd::spec_test::homogeneity_p_value(plain, lossy), 1e-3) << "the negative control did not fire";
}

}  // namespace
