// onegram: a complete out-of-tree specd proposer plugin.
//
// It proposes the tokens that followed the most recent earlier occurrence of the sequence's
// last token (a 1-gram prompt lookup). Given tokens  5 7 9 4 5 , the last token 5 occurred
// before at position 0, so it proposes 7 9 4 (up to k tokens: with k = 3, `7 9 4`).
//
// Build against an installed SDK:  cmake -S . -B build -DCMAKE_PREFIX_PATH=<specd prefix>
// Use it:  plugins.paths: [<build dir>]  and  speculative.proposer: {name: onegram}
#include <specd/sdk/plugin.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace {

class OneGramProposer : public specd::sdk::Proposer {
 public:
  OneGramProposer(specd::sdk::Host host, specd::sdk::Params& params)
      : log_(host.log()), max_lookback_(params.get_int("max_lookback", 0, 0, int64_t{1} << 30)) {
    log_.debug("onegram proposer created, max_lookback=", max_lookback_);
  }

  // Validates parameters without creating a proposer (used by `specd validate`).
  static void validate(specd::sdk::Params& params) { params.get_int("max_lookback", 0, 0, int64_t{1} << 30); }

  specd::sdk::ProposerCaps capabilities() const override {
    specd::sdk::ProposerCaps caps;
    caps.produces_draft_probs = false;  // one-hot drafts
    caps.keeps_state = false;           // it reads the token history each step
    caps.supports_variable_k = true;
    return caps;
  }

  void propose(specd::sdk::ProposeBatch& batch) override {
    for (int32_t i = 0; i < batch.size(); ++i) {
      const auto seq = batch.seq(i);
      const int32_t k = batch.max_draft(i);
      const int64_t n = static_cast<int64_t>(seq.tokens.size());
      if (k <= 0 || n < 2) continue;
      const int32_t last = seq.tokens[n - 1];
      const int64_t stop = max_lookback_ > 0 ? std::max<int64_t>(0, n - 1 - max_lookback_) : 0;
      for (int64_t j = n - 2; j >= stop; --j) {
        if (seq.tokens[j] != last) continue;
        const int64_t count = std::min<int64_t>(k, n - 1 - j);
        draft_.assign(seq.tokens.begin() + j + 1, seq.tokens.begin() + j + 1 + count);
        batch.set_draft(i, draft_);
        break;
      }
    }
  }

 private:
  specd::sdk::Logger log_;
  int64_t max_lookback_;
  std::vector<int32_t> draft_;  // reused across calls: no allocation per step
};

}  // namespace

SPECD_PLUGIN("onegram", "1.0.0",
             specd::sdk::proposer<OneGramProposer>(
                 "onegram", "Proposes what followed the last earlier occurrence of the last token"))
