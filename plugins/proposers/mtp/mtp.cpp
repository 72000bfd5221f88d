// mtp: multi-token-prediction heads (DeepSeek-V3 layout) draft from the target's own hidden
// states. Module i maps (hidden state, next token) to a new hidden state and logits one token
// further ahead: h' = block_i(eh_proj_i(concat(enorm_i(embed(token)), hnorm_i(h)))). The host
// runs one module per forward (model services load_mtp + forward with input_hidden); this
// plugin decides what each module is fed and keeps each module's KV consistent.
//
// Notation: tok_t = token t of the sequence (L tokens at a propose), h_p = the target's final
// hidden state at position p (it predicted tok_{p+1}), out_i(p) = module i's output hidden
// state at entry p, M = num_modules, d_j = draft j (it proposes tok_{L+j}).
//
// What each module's KV holds. Entry p of module i (its p-th cached token, so positions stay
// aligned with the target's) is the pair
//     x_i(p) = (i == 0 ? h_p : out_{i-1}(p)),  token tok_{p+1+i},
// and predicts tok_{p+2+i}. This is exactly the DeepSeek-V3 MTP computation: module i
// attends over its own entries 0..p. An entry is *committed* when every token it depends on is
// part of the sequence: p <= L-2-i. Between steps each module holds only committed entries
// (M_i = its cached length <= L-1-i), and the plugin keeps the inputs it will need next:
//     inputs[0] = h_p for p in [M_0, received), the target hidden states not yet fed
//                 (at least h_{L-2} once the previous step's tokens are known),
//     inputs[i] = out_{i-1}(p) for p in [M_i, M_{i-1}), i >= 1.
//
// propose(k): step j uses module min(j, M-1), one batched forward per step:
//   - j < M: module j is fed its entries [M_j, L-1): committed catch-up (p <= L-2-j) followed
//     by j speculative entries whose tokens are d_0..d_{j-1}; its logits at entry L-2 give d_j
//     (module 0's catch-up is the (h_p, tok_{p+1}) pairs for the newly committed positions).
//     Modules with j >= k_i still catch up on committed entries, so nothing piles up.
//   - j >= M (k > M): the last module is applied recursively: one entry at the next position
//     with x = its own previous output and token d_{j-1}. This reuse is the one approximation
//     (the module was trained on out_{M-2}, not its own output); such entries are never kept.
// Modules below M-1 give the next module their output hidden state at every entry: they run with
// hidden_all (ABI 1.7) and logits only where a draft is read, none at all in on_prefill and
// catch-up (before 1.7 all_logits = 1 put the LM head on every entry). Those calls are split
// at kMaxRowsPerForward rows to bound the [rows, hidden] buffer.
//
// on_accept(n): entry p of module i (non-recursive) depends on drafts d_0..d_{p+i+1-L}, so it
// stays valid iff p <= L+n-2-i. Module i keeps min(M_i, L-1-max(0, i-n)) entries (recursive
// entries, at positions >= L-1, always go) and inputs[i+1] drops outputs of dropped entries.
// The next propose brings the hidden states of the n+1 newly committed positions.
#include <specd/sdk/model_client.hpp>
#include <specd/sdk/plugin.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "draft_support.hpp"

namespace {

using specd::sdk::ModelClient;
namespace sdk = specd::sdk;

constexpr int64_t kMaxRowsPerForward = 512;

struct Settings {
  int32_t num_modules = 0;  // 0 = every module the target has
  float temperature = 0;
  float draft_p_min = 0;       // stop at the first draft whose confidence is below this (0 = off)
  bool gumbel_drafts = false;  // draft_sampler: gumbel (sampled drafts share the coupled noise)
};

Settings read_settings(sdk::Params& params) {
  Settings s;
  s.num_modules = static_cast<int32_t>(params.get_int("num_modules", 0, 1, 1024));
  s.temperature = specd::proposers::read_temperature(params);
  s.draft_p_min = specd::proposers::read_draft_p_min(params);
  s.gumbel_drafts = specd::proposers::read_gumbel_drafts(params);
  return s;
}

// Hidden-state rows indexed by position: rows for positions [first, first + count).
class HiddenRows {
 public:
  int64_t first() const { return first_; }
  int64_t end(int64_t hidden) const { return first_ + static_cast<int64_t>(data_.size()) / hidden; }
  const float* row(int64_t pos, int64_t hidden) const { return data_.data() + (pos - first_) * hidden; }

  // Appends rows for positions [pos, pos + n); rows already held are skipped. A gap is an error
  // the caller reports (returns false).
  bool append(int64_t pos, const float* rows, int64_t n, int64_t hidden) {
    if (data_.empty()) first_ = pos;
    const int64_t have_end = end(hidden);
    if (pos > have_end) return false;
    const int64_t skip = have_end - pos;
    if (skip >= n) return true;
    data_.insert(data_.end(), rows + skip * hidden, rows + n * hidden);
    return true;
  }
  void drop_before(int64_t pos, int64_t hidden) {
    if (pos <= first_) return;
    const int64_t n = std::min<int64_t>(pos - first_, static_cast<int64_t>(data_.size()) / hidden);
    data_.erase(data_.begin(), data_.begin() + n * hidden);
    first_ = pos;
  }
  void drop_from(int64_t pos, int64_t hidden) {
    if (pos >= end(hidden)) return;
    data_.resize(static_cast<size_t>(std::max<int64_t>(0, pos - first_) * hidden));
  }

 private:
  int64_t first_ = 0;
  std::vector<float> data_;
};

struct SeqState {
  std::vector<HiddenRows> inputs;  // [num_modules], see the file comment
  int64_t context_len = 0;         // sequence length at the last propose that drafted
  int32_t drafted = 0;
  bool pending = false;  // drafted and not yet settled by on_accept
};

class MtpProposer : public sdk::Proposer {
 public:
  MtpProposer(sdk::Host host, sdk::Params& params) : host_(host), log_(host.log()), settings_(read_settings(params)) {
    params.check();
    if (host.models() == nullptr)
      throw sdk::Error("mtp proposer needs the host's model services, and this host provides none",
                       SPECD_ERR_UNSUPPORTED);
    client_.emplace(*host.models(), host.host_ctx(), "mtp");
    try {
      // nullptr = the engine's target: its MTP modules are loaded without a copy of the target.
      const specd_model_info info = client_->info(nullptr);
      if (info.num_mtp_modules <= 0) throw sdk::Error("mtp: target model has no MTP modules (mtp.* tensors)");
      if (settings_.num_modules > info.num_mtp_modules)
        throw sdk::Error(sdk::detail::concat("mtp: ", params.path(), params.path().empty() ? "" : ".",
                                             "num_modules = ", settings_.num_modules, " but the target has only ",
                                             info.num_mtp_modules, " MTP modules"));
      num_modules_ = settings_.num_modules > 0 ? settings_.num_modules : info.num_mtp_modules;
      vocab_ = info.vocab_size;
      hidden_ = info.hidden_size;
      for (int32_t m = 0; m < num_modules_; ++m) modules_.push_back(client_->load_mtp(nullptr, m));
      for (specd_model* module : modules_) {
        const specd_model_info mi = client_->info(module);
        if (mi.vocab_size != vocab_ || mi.hidden_size != hidden_)
          throw sdk::Error(sdk::detail::concat("mtp: an MTP module has vocabulary ", mi.vocab_size, " and hidden size ",
                                               mi.hidden_size, ", the target ", vocab_, " and ", hidden_));
      }
    } catch (...) {
      release_models();
      throw;
    }
    log_.info("mtp proposer: ", num_modules_, " module(s), temperature ", settings_.temperature);
  }

  ~MtpProposer() override {
    for (const auto& [id, state] : seqs_)
      for (specd_model* module : modules_) client_->drop(module, id);
    release_models();
  }
  MtpProposer(const MtpProposer&) = delete;
  MtpProposer& operator=(const MtpProposer&) = delete;

  static void validate(sdk::Params& params) { read_settings(params); }

  sdk::ProposerCaps capabilities() const override {
    sdk::ProposerCaps caps;
    caps.produces_draft_probs = settings_.temperature > 0;
    caps.needs_target_hidden = true;
    caps.keeps_state = true;
    caps.supports_variable_k = true;
    return caps;
  }

  // Module i is fed its committed entries [M_i, len-1-i): every pair whose tokens are known.
  void on_prefill(const sdk::PrefillBatch& batch) override {
    work_.clear();
    for (int32_t i = 0; i < batch.size(); ++i) {
      const sdk::Sequence seq = batch.seq(i);
      SeqState& state = state_of(seq.id);
      const int64_t len = static_cast<int64_t>(seq.tokens.size());
      const int32_t n = batch.num_new(i);
      if (n > 0) {
        check_hidden_view(batch.hidden_size(), SPECD_DTYPE_F32, SPECD_DEVICE_CPU, "prefill");
        receive_hidden(seq.id, state, len - n, batch.target_hidden(i).data(), n);
      }
      work_.push_back({-1, seq.id, &state, seq.tokens, len, 0});
    }
    for (int32_t m = 0; m < num_modules_; ++m) run_step(m, nullptr);
  }

  void propose(sdk::ProposeBatch& batch) override {
    if (batch.vocab_size() != vocab_)
      throw sdk::Error(sdk::detail::concat("mtp: the MTP modules' vocabulary (", vocab_,
                                           " tokens) differs from the batch's (", batch.vocab_size(), " tokens)"));
    work_.clear();
    int32_t max_k = 0;
    for (int32_t i = 0; i < batch.size(); ++i) {
      const sdk::Sequence seq = batch.seq(i);
      SeqState& state = state_of(seq.id);
      if (state.pending) settle(seq.id, state, 0);  // on_accept is due first; assume nothing accepted
      const int64_t len = static_cast<int64_t>(seq.tokens.size());
      const int32_t nh = batch.num_hidden(i);
      if (nh > 0) {
        const specd_tensor_view& view = batch.raw()->target_hidden;
        check_hidden_view(batch.hidden_size(), view.dtype, view.device.type, "propose");
        receive_hidden(seq.id, state, len - 1 - nh, batch.target_hidden(i).data(), nh);
      }
      // Drafting needs the pair (h_{L-2}, tok_{L-1}) to be new to module 0.
      int32_t k = batch.max_draft(i);
      if (len < 2 || client_->seq_length(modules_[0], seq.id) > len - 2) k = 0;
      if (k > 0) {
        state.context_len = len;
        state.drafted = k;
        state.pending = true;
      }
      work_.push_back({i, seq.id, &state, seq.tokens, len, k});
      max_k = std::max(max_k, k);
    }
    k_stride_ = std::max(max_k, 1);
    drafts_.assign(work_.size() * static_cast<size_t>(k_stride_), -1);
    last_hidden_.resize(work_.size() * static_cast<size_t>(hidden_));

    const int32_t steps = std::max(max_k, num_modules_);
    for (int32_t j = 0; j < steps; ++j) run_step(j, &batch);
    for (size_t w = 0; w < work_.size(); ++w) {
      if (!work_[w].state->pending) continue;
      work_[w].state->drafted = work_[w].k;
      batch.set_draft(work_[w].index, {&drafts_[w * k_stride_], static_cast<size_t>(work_[w].k)});
    }
  }

  void on_accept(uint64_t seq_id, int32_t num_accepted, std::span<const int32_t> emitted) override {
    auto it = seqs_.find(seq_id);
    if (it == seqs_.end() || !it->second.pending) return;
    if (num_accepted < 0 || num_accepted > it->second.drafted ||
        static_cast<int64_t>(emitted.size()) != static_cast<int64_t>(num_accepted) + 1)
      throw sdk::Error(sdk::detail::concat("mtp: on_accept for sequence ", seq_id, ": ", num_accepted, " accepted of ",
                                           it->second.drafted, " drafts with ", emitted.size(), " emitted tokens"));
    settle(seq_id, it->second, num_accepted);
  }

  void on_release(uint64_t seq_id) override {
    if (seqs_.erase(seq_id) == 0) return;
    for (specd_model* module : modules_) client_->drop(module, seq_id);
  }

 private:
  struct Work {
    int32_t index;  // row in the propose batch; -1 in prefill
    uint64_t id;
    SeqState* state;
    std::span<const int32_t> tokens;
    int64_t len;
    int32_t k;  // drafts to make
  };
  // One sequence's entries [first, first + count) in the current step's forward.
  struct Feed {
    size_t work;
    int64_t first;
    int64_t count;
    size_t x_offset;      // into x_, [count, hidden]
    size_t token_offset;  // into feed_tokens_
    bool drafting;        // its last entry's logits give draft j
  };

  SeqState& state_of(uint64_t id) {
    SeqState& state = seqs_[id];
    if (state.inputs.empty()) state.inputs.resize(static_cast<size_t>(num_modules_));
    return state;
  }

  // The prefill batch's helper does not expose dtype and device; callers pass F32 / CPU there.
  void check_hidden_view(int64_t hidden, int32_t dtype, int32_t device, const char* where) const {
    if (hidden == 0)
      throw sdk::Error(sdk::detail::concat("mtp: the ", where, " batch carries no target hidden states"),
                       SPECD_ERR_INVALID_ARGUMENT);
    if (dtype != SPECD_DTYPE_F32 || device != SPECD_DEVICE_CPU)
      throw sdk::Error(sdk::detail::concat("mtp: target hidden states must be f32 in CPU memory (", where,
                                           " batch has dtype ", dtype, " on device type ", device, ")"),
                       SPECD_ERR_UNSUPPORTED);
    if (hidden != hidden_)
      throw sdk::Error(sdk::detail::concat("mtp: ", where, " batch carries target hidden states of width ", hidden,
                                           ", the target's hidden size is ", hidden_),
                       SPECD_ERR_INVALID_ARGUMENT);
  }
  void receive_hidden(uint64_t id, SeqState& state, int64_t pos, const float* rows, int64_t n) {
    if (rows == nullptr)
      throw sdk::Error(sdk::detail::concat("mtp: sequence ", id, ": the host passed no target hidden states"),
                       SPECD_ERR_INVALID_ARGUMENT);
    state.inputs[0].drop_before(client_->seq_length(modules_[0], id), hidden_);
    if (!state.inputs[0].append(pos, rows, n, hidden_))
      throw sdk::Error(sdk::detail::concat("mtp: sequence ", id, ": target hidden states start at position ", pos,
                                           " but positions from ", state.inputs[0].end(hidden_), " were never given"),
                       SPECD_ERR_INVALID_ARGUMENT);
  }

  // Token of entry p of module m: tok_{p+1+m}, a draft past the sequence's end.
  int32_t entry_token(size_t w, int64_t p, int32_t m) const {
    const int64_t t = p + 1 + m;
    const Work& work = work_[w];
    return t < work.len ? work.tokens[static_cast<size_t>(t)]
                        : drafts_[w * k_stride_ + static_cast<size_t>(t - work.len)];
  }

  // Step j of a propose (batch != nullptr), or module j's committed catch-up in a prefill.
  void run_step(int32_t j, sdk::ProposeBatch* batch) {
    const bool recursive = j >= num_modules_;
    const int32_t m = recursive ? num_modules_ - 1 : j;
    feeds_.clear();
    x_.clear();
    feed_tokens_.clear();
    for (size_t w = 0; w < work_.size(); ++w) {
      Work& work = work_[w];
      bool drafting = work.k > j;
      if (recursive) {
        if (!drafting) continue;
        feeds_.push_back({w, 0, 1, x_.size(), feed_tokens_.size(), true});
        x_.insert(x_.end(), last_hidden_.begin() + static_cast<int64_t>(w) * hidden_,
                  last_hidden_.begin() + static_cast<int64_t>(w + 1) * hidden_);
        feed_tokens_.push_back(drafts_[w * k_stride_ + static_cast<size_t>(j - 1)]);
        continue;
      }
      SeqState& state = *work.state;
      const int64_t cached = client_->seq_length(modules_[m], work.id);
      if (drafting && cached > work.len - 2) {
        // Entry L-2 of module m was fed before (cannot happen after on_accept): stop here.
        work.k = j;
        drafting = false;
      }
      const int64_t end = drafting ? work.len - 1 : work.len - 1 - m;
      state.inputs[m].drop_before(cached, hidden_);
      if (end <= cached) continue;
      if (state.inputs[m].first() > cached || state.inputs[m].end(hidden_) < end)
        throw sdk::Error(sdk::detail::concat("mtp: sequence ", work.id, ": module ", m,
                                             " needs input hidden states for [", cached, ", ", end, ") but holds [",
                                             state.inputs[m].first(), ", ", state.inputs[m].end(hidden_), ")"),
                         SPECD_ERR_INTERNAL);
      feeds_.push_back({w, cached, end - cached, x_.size(), feed_tokens_.size(), drafting});
      x_.insert(x_.end(), state.inputs[m].row(cached, hidden_), state.inputs[m].row(end, hidden_));
      for (int64_t p = cached; p < end; ++p) feed_tokens_.push_back(entry_token(w, p, m));
    }
    if (feeds_.empty()) return;
    // The next module needs this module's output at every entry.
    const bool all_rows = !recursive && m + 1 < num_modules_;
    run_module(m, all_rows, j, batch);
  }

  // Runs module m over feeds_, in as many forward calls as the row cap needs (one, except for
  // long prefill chunks with all_rows).
  void run_module(int32_t m, bool all_rows, int32_t j, sdk::ProposeBatch* batch) {
    pieces_.clear();
    int64_t call_rows = 0;
    for (size_t f = 0; f < feeds_.size(); ++f) {
      int64_t done = 0;
      while (done < feeds_[f].count) {
        const int64_t take =
            all_rows ? std::min(feeds_[f].count - done, kMaxRowsPerForward - call_rows) : feeds_[f].count - done;
        pieces_.push_back({f, done, take});
        done += take;
        call_rows += take;
        if (all_rows && call_rows == kMaxRowsPerForward) {
          forward_pieces(m, all_rows, j, batch);
          call_rows = 0;
        }
      }
    }
    if (!pieces_.empty()) forward_pieces(m, all_rows, j, batch);
  }

  void forward_pieces(int32_t m, bool all_rows, int32_t j, sdk::ProposeBatch* batch) {
    seq_ids_.clear();
    num_new_.clear();
    tokens_.clear();
    in_hidden_.clear();
    for (const Piece& piece : pieces_) {
      const Feed& feed = feeds_[piece.feed];
      seq_ids_.push_back(work_[feed.work].id);
      num_new_.push_back(static_cast<int32_t>(piece.count));
      const size_t t0 = feed.token_offset + static_cast<size_t>(piece.offset);
      tokens_.insert(tokens_.end(), feed_tokens_.begin() + static_cast<int64_t>(t0),
                     feed_tokens_.begin() + static_cast<int64_t>(t0 + static_cast<size_t>(piece.count)));
      const size_t x0 = feed.x_offset + static_cast<size_t>(piece.offset * hidden_);
      in_hidden_.insert(in_hidden_.end(), x_.begin() + static_cast<int64_t>(x0),
                        x_.begin() + static_cast<int64_t>(x0 + static_cast<size_t>(piece.count * hidden_)));
    }
    // A draft is read from a piece's last row where its feed drafts and the piece ends the feed.
    auto reads_draft = [&](const Piece& piece) {
      const Feed& feed = feeds_[piece.feed];
      return feed.drafting && piece.offset + piece.count == feed.count;
    };
    const bool any_draft = std::any_of(pieces_.begin(), pieces_.end(), reads_draft);
    const size_t rows = all_rows ? tokens_.size() : seq_ids_.size();  // hidden rows
    logits_.resize(seq_ids_.size() * static_cast<size_t>(vocab_));    // each row's last token
    out_hidden_.resize(rows * static_cast<size_t>(hidden_));
    specd_forward_batch fb{};
    fb.struct_size = sizeof(fb);
    fb.num_seqs = static_cast<int32_t>(seq_ids_.size());
    fb.seq_ids = seq_ids_.data();
    fb.num_new = num_new_.data();
    fb.tokens = tokens_.data();
    fb.all_logits = 0;
    fb.logits = any_draft ? logits_.data() : nullptr;  // none: no LM head at all
    fb.hidden = out_hidden_.data();
    fb.input_hidden = in_hidden_.data();
    fb.hidden_all = all_rows ? 1 : 0;
    client_->forward(modules_[m], fb);

    size_t row = 0;  // first output row of the current piece
    for (size_t p = 0; p < pieces_.size(); ++p) {
      const Piece& piece = pieces_[p];
      const Feed& feed = feeds_[piece.feed];
      const size_t w = feed.work;
      const size_t last = all_rows ? row + static_cast<size_t>(piece.count) - 1 : row;  // its hidden row
      if (all_rows) {
        HiddenRows& next = work_[w].state->inputs[static_cast<size_t>(m) + 1];
        if (!next.append(feed.first + piece.offset, out_hidden_.data() + row * static_cast<size_t>(hidden_),
                         piece.count, hidden_))
          throw sdk::Error(sdk::detail::concat("mtp: sequence ", work_[w].id, ": outputs of module ", m,
                                               " do not continue the inputs of module ", m + 1),
                           SPECD_ERR_INTERNAL);
      }
      if (reads_draft(piece)) {
        const sdk::Sequence seq = batch->seq(work_[w].index);
        const std::span<float> logits(logits_.data() + p * static_cast<size_t>(vocab_), static_cast<size_t>(vocab_));
        const bool allowed = specd::proposers::mask_by_grammar(
            host_, work_[w].id, {&drafts_[w * k_stride_], static_cast<size_t>(j)}, logits);
        std::span<float> probs;
        if (settings_.temperature > 0) probs = batch->draft_probs(work_[w].index, j);
        drafts_[w * k_stride_ + static_cast<size_t>(j)] = specd::proposers::choose_draft(
            logits, settings_.temperature, seq.seed, seq.step, j, probs, settings_.gumbel_drafts);
        // Below the confidence cut-off, or nothing the grammar allows: draft j is dropped and
        // later steps only catch up, as when a module cannot draft (the modules' entries are
        // settled from num_accepted alone).
        if (!allowed || (settings_.draft_p_min > 0 &&
                         specd::proposers::confidence(logits, settings_.temperature, probs) < settings_.draft_p_min))
          work_[w].k = j;
        std::memcpy(last_hidden_.data() + w * static_cast<size_t>(hidden_),
                    out_hidden_.data() + last * static_cast<size_t>(hidden_),
                    sizeof(float) * static_cast<size_t>(hidden_));
      }
      row = all_rows ? row + static_cast<size_t>(piece.count) : row + 1;
    }
    pieces_.clear();
  }

  // Rolls every module back to the entries that stay valid with num_accepted drafts accepted.
  void settle(uint64_t id, SeqState& state, int32_t num_accepted) {
    const int64_t len = state.context_len;
    for (int32_t m = 0; m < num_modules_; ++m) {
      const int64_t cached = client_->seq_length(modules_[m], id);
      const int64_t keep = std::min<int64_t>(cached, len - 1 - std::max(0, m - num_accepted));
      if (keep < cached) client_->truncate(modules_[m], id, std::max<int64_t>(keep, 0));
      if (m + 1 < num_modules_) state.inputs[static_cast<size_t>(m) + 1].drop_from(keep, hidden_);
    }
    state.pending = false;
  }

  void release_models() {
    for (specd_model* module : modules_) client_->release(module);
    modules_.clear();
  }

  struct Piece {
    size_t feed;
    int64_t offset;  // first entry of the feed in this piece
    int64_t count;
  };

  sdk::Host host_;  // the allowed_tokens service (structured output)
  sdk::Logger log_;
  Settings settings_;
  std::optional<ModelClient> client_;
  std::vector<specd_model*> modules_;
  int32_t num_modules_ = 0;
  int32_t vocab_ = 0;
  int64_t hidden_ = 0;
  std::unordered_map<uint64_t, SeqState> seqs_;
  // Per-call buffers, reused across calls.
  std::vector<Work> work_;
  size_t k_stride_ = 1;
  std::vector<int32_t> drafts_;     // [work, k_stride]
  std::vector<float> last_hidden_;  // [work, hidden]: output at the latest drafting entry
  std::vector<Feed> feeds_;
  std::vector<Piece> pieces_;
  std::vector<float> x_;
  std::vector<int32_t> feed_tokens_;
  std::vector<uint64_t> seq_ids_;
  std::vector<int32_t> num_new_;
  std::vector<int32_t> tokens_;
  std::vector<float> in_hidden_;
  std::vector<float> logits_;
  std::vector<float> out_hidden_;
};

}  // namespace

SPECD_PLUGIN("mtp", "1.0.0",
             specd::sdk::proposer<MtpProposer>("mtp",
                                               "Multi-token-prediction heads draft from the target's hidden states"))
