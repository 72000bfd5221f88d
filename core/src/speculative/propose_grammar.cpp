#include "speculative/propose_grammar.hpp"

#include <algorithm>

namespace specd::speculative {

bool ProposeGrammar::any() const {
  return std::any_of(rows_.begin(), rows_.end(),
                     [](const sched::StepRow* r) { return r->seq->constraint.has_value(); });
}

int32_t ProposeGrammar::allowed_tokens(uint64_t seq_id, std::span<const int32_t> prefix,
                                       std::span<uint64_t> mask) const {
  for (const sched::StepRow* row : rows_) {
    const sched::Sequence& s = *row->seq;
    if (s.id != seq_id) continue;
    if (!s.constraint) return 0;
    if (mask.size() * 64 < s.constraint->vocab_size()) return -1;
    try {
      s.constraint->allowed_mask(prefix, s.stop_ids, mask);
    } catch (const std::exception&) {
      return -1;  // a grammar too ambiguous for this prefix: the row's own mask will fail it
    }
    return 1;
  }
  return -1;
}

}  // namespace specd::speculative
