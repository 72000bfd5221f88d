#include "speculative/proposer_feed.hpp"

#include "sched/scheduler.hpp"
#include "specd/error.hpp"

namespace specd::speculative {

bool ProposerFeed::prefilled(sched::SeqId id) const {
  const auto it = seqs_.find(id);
  return it != seqs_.end() && it->second.prefilled;
}

int32_t ProposerFeed::begin_prefill(const sched::StepRow& row, std::vector<float>& hidden) {
  SeqState& st = seqs_[row.seq->id];
  // A chunk may start past positions the proposer was shown: a choice forked from another's
  // prompt (n > 1), a prompt found in the prefix cache, or a prompt whose last token went through
  // a speculative step (a one-token last chunk is scheduled as a decode) and that now decodes
  // plainly. They all reach it now: the proposer catches up on its own. Not for proposers that
  // need the target's hidden states: the engine neither forks nor caches prefixes for them.
  const bool catch_up = row.start > st.next_pos && !wants_hidden_;
  SPECD_CHECK((row.start == st.next_pos || catch_up) && st.rows.empty(), ErrorCode::kInternal,
              "speculator: prefill chunk of sequence " + std::to_string(row.seq->id) + " starts at " +
                  std::to_string(row.start) + ", the proposer has seen up to " + std::to_string(st.next_pos));
  if (wants_hidden_) append_range(row, 0, row.n, hidden);
  return row.start + row.n - static_cast<int32_t>(st.next_pos);
}

void ProposerFeed::end_prefill(const sched::StepRow& row) {
  SeqState& st = seqs_[row.seq->id];
  st.next_pos = row.start + row.n;
  // The chunk that ends the prompt, or the one that ends a preempted sequence's re-prefill (all
  // but its last token: the scheduler leaves that one to the next decode).
  const auto len = static_cast<int64_t>(row.seq->tokens.size());
  if (row.sample || (row.seq->num_generated() > 0 && st.next_pos == len - 1)) st.prefilled = true;
}

void ProposerFeed::add_hidden(const sched::StepRow& row, int32_t n) {
  SeqState& st = seqs_[row.seq->id];
  SPECD_CHECK(row.start == st.next_pos, ErrorCode::kInternal,
              "speculator: hidden states of sequence " + std::to_string(row.seq->id) + " for position " +
                  std::to_string(row.start) + ", expected position " + std::to_string(st.next_pos));
  if (!row.tree() || n <= row.n) {
    append_range(row, 0, n, st.rows);
  } else {  // the chunk, then the accepted path's nodes (rows n + node)
    append_range(row, 0, row.n, st.rows);
    for (int32_t i = 0; i < n - row.n; ++i)
      append_range(row, row.n + row.accepted_nodes[static_cast<size_t>(i)], 1, st.rows);
  }
  st.next_pos = row.start + n;
}

void ProposerFeed::append_range(const sched::StepRow& row, int32_t first, int32_t count,
                                std::vector<float>& out) const {
  const auto H = static_cast<size_t>(hidden_size_);
  const size_t aux = static_cast<size_t>(num_aux_) * H;
  for (int32_t p = first; p < first + count; ++p) {
    const float* h = row.hidden + static_cast<size_t>(p) * H;
    out.insert(out.end(), h, h + H);
    if (aux == 0) continue;
    const float* a = row.aux_hidden + static_cast<size_t>(p) * aux;
    out.insert(out.end(), a, a + aux);
  }
}

void ProposerFeed::take_hidden(std::span<sched::StepRow* const> rows, std::vector<int32_t>& num,
                               std::vector<float>& hidden) {
  const auto H = static_cast<size_t>(feature_width());
  num.assign(rows.size(), 0);
  for (size_t i = 0; i < rows.size(); ++i) {
    const sched::Sequence& s = *rows[i]->seq;
    auto it = seqs_.find(s.id);
    if (it == seqs_.end()) continue;
    const auto L = static_cast<int64_t>(s.tokens.size());
    SPECD_CHECK(it->second.next_pos == L - 1, ErrorCode::kInternal,
                "speculator: sequence " + std::to_string(s.id) + " of length " + std::to_string(L) +
                    " has target hidden states up to position " + std::to_string(it->second.next_pos));
    num[i] = static_cast<int32_t>(it->second.rows.size() / H);
    hidden.insert(hidden.end(), it->second.rows.begin(), it->second.rows.end());
    it->second.rows.clear();  // the proposer keeps what it is given ("committed since the previous call")
  }
}

}  // namespace specd::speculative
