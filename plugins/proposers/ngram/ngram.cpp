// ngram: prompt-lookup decoding. For each sequence it finds the longest suffix n-gram
// (n in [prompt_lookup_min, prompt_lookup_max], longest first) that occurred earlier in
// prompt + generated tokens, and proposes up to k tokens that followed its most recent earlier
// occurrence. With structured output (ABI 1.5 allowed_tokens) it skips a match whose next token
// the request's grammar forbids and takes the next shorter n-gram's match instead.
//
// Complexity: an index per sequence maps each n-gram (hashed) to the end of its most recent
// occurrence. Each step indexes only the tokens appended since the previous step, n-grams of
// every length at each new position: O(new_tokens · N²) with N = prompt_lookup_max, and the
// lookup is O(N²) (hash + verify per length). Neither depends on the sequence length; memory
// is O(length · N) per sequence.
#include <specd/sdk/plugin.hpp>

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace {

constexpr int64_t kMaxN = 64;

// FNV-1a over the n tokens ending at `end` (exclusive), mixed with n so different lengths
// never share keys.
uint64_t ngram_hash(const int32_t* tokens, int64_t end, int64_t n) {
  uint64_t h = 1469598103934665603ull ^ static_cast<uint64_t>(n) * 0x9E3779B97F4A7C15ull;
  for (int64_t i = end - n; i < end; ++i) {
    h ^= static_cast<uint32_t>(tokens[i]);
    h *= 1099511628211ull;
  }
  return h;
}

struct SequenceIndex {
  int64_t indexed = 0;                             // n-grams ending at every e <= indexed have been inserted
  int32_t first = -1;                              // first token, to notice a reused id with a different history
  std::unordered_map<uint64_t, int64_t> last_end;  // hash(n-gram) → most recent end (exclusive)
};

class NgramProposer : public specd::sdk::Proposer {
 public:
  NgramProposer(specd::sdk::Host host, specd::sdk::Params& params) : host_(host), log_(host.log()) {
    read(params, &min_n_, &max_n_);
    log_.debug("ngram proposer: n in [", min_n_, ", ", max_n_, "]");
  }

  static void validate(specd::sdk::Params& params) {
    int64_t lo, hi;
    read(params, &lo, &hi);
  }

  specd::sdk::ProposerCaps capabilities() const override {
    specd::sdk::ProposerCaps caps;
    caps.produces_draft_probs = false;
    caps.needs_target_hidden = false;
    // Keeps a per-sequence index (freed in on_release). It only indexes committed tokens, so
    // on_accept has nothing to roll back.
    caps.keeps_state = true;
    caps.supports_variable_k = true;
    return caps;
  }

  void propose(specd::sdk::ProposeBatch& batch) override {
    for (int32_t i = 0; i < batch.size(); ++i) {
      const auto seq = batch.seq(i);
      const int32_t k = batch.max_draft(i);
      const int64_t len = static_cast<int64_t>(seq.tokens.size());
      if (len == 0) continue;
      SequenceIndex& index = indexes_[seq.id];
      if (len < index.indexed || (index.first >= 0 && index.first != seq.tokens[0])) index = SequenceIndex{};
      index.first = seq.tokens[0];
      // Index occurrences that have at least one following token: ends e < len.
      for (int64_t e = std::max<int64_t>(index.indexed + 1, min_n_); e < len; ++e)
        for (int64_t n = min_n_; n <= std::min(max_n_, e); ++n) index.last_end[ngram_hash(seq.tokens.data(), e, n)] = e;
      index.indexed = std::max(index.indexed, len - 1);
      if (k <= 0) continue;

      // The grammar's allowed next tokens, when the request has one (else no mask: any match).
      mask_.assign((static_cast<size_t>(batch.vocab_size()) + 63) / 64, 0);
      const bool constrained = host_.allowed_tokens(seq.id, {}, mask_);
      const int64_t e = find(index, seq.tokens.data(), len, constrained ? &mask_ : nullptr);
      if (e < 0) continue;
      const int64_t count = std::min<int64_t>(k, len - e);
      draft_.assign(seq.tokens.begin() + e, seq.tokens.begin() + e + count);
      batch.set_draft(i, draft_);
    }
  }

  void on_release(uint64_t seq_id) override { indexes_.erase(seq_id); }

 private:
  static void read(specd::sdk::Params& params, int64_t* lo, int64_t* hi) {
    *lo = params.get_int("prompt_lookup_min", 1, 1, kMaxN);
    *hi = params.get_int("prompt_lookup_max", 4, 1, kMaxN);
    if (*lo > *hi) {
      params.error("prompt_lookup_min",
                   "must be <= prompt_lookup_max (" + std::to_string(*hi) + "), got " + std::to_string(*lo));
      *lo = *hi;
    }
  }

  // End (exclusive) of the most recent earlier occurrence of the longest matching suffix whose
  // next token `allowed` (a bit per token id; null = any) lets through, or -1.
  int64_t find(const SequenceIndex& index, const int32_t* tokens, int64_t len,
               const std::vector<uint64_t>* allowed) const {
    for (int64_t n = std::min(max_n_, len - 1); n >= min_n_; --n) {
      auto it = index.last_end.find(ngram_hash(tokens, len, n));
      if (it == index.last_end.end()) continue;
      const int64_t e = it->second;
      // Verify: a hash collision must never turn into a wrong claim of a match.
      if (!std::equal(tokens + e - n, tokens + e, tokens + len - n)) continue;
      const auto next = static_cast<size_t>(tokens[e]);
      if (allowed == nullptr || (next / 64 < allowed->size() && ((*allowed)[next / 64] >> (next % 64) & 1) != 0))
        return e;
    }
    return -1;
  }

  specd::sdk::Host host_;  // the allowed_tokens service (structured output)
  specd::sdk::Logger log_;
  int64_t min_n_ = 1;
  int64_t max_n_ = 4;
  std::unordered_map<uint64_t, SequenceIndex> indexes_;
  std::vector<int32_t> draft_;
  std::vector<uint64_t> mask_;
};

}  // namespace

SPECD_PLUGIN("ngram", "1.0.0",
             specd::sdk::proposer<NgramProposer>("ngram",
                                                 "Prompt lookup: continues the longest earlier match of the suffix"))
