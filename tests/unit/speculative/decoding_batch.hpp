// Decoding rows for the policy's tests: n sequences (ids 1..n, dynamic k) at the decode of token
// 2 of {1, 2, 3}, each row with `lookahead` draft slots reserved; the tests fill in drafts and
// outcomes.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sched/scheduler.hpp"

namespace specd::speculative::testing {

struct DecodingBatch {
  std::vector<std::unique_ptr<sched::Sequence>> seqs;
  sched::StepBatch batch;
  std::vector<sched::StepRow*> rows;  // batch.rows, after fill()
  int32_t lookahead;

  DecodingBatch(int n, int32_t k) : lookahead(k) {
    for (int i = 0; i < n; ++i) {
      auto s = std::make_unique<sched::Sequence>();
      s->id = static_cast<RequestId>(i + 1);
      s->tokens = {1, 2, 3};
      s->num_prompt = 2;
      s->spec_k = k;
      s->dynamic_k = true;
      seqs.push_back(std::move(s));
    }
  }

  // A new step: one decoding row per sequence.
  void fill() {
    batch.clear();
    for (auto& s : seqs) {
      sched::StepRow row;
      row.seq = s.get();
      row.start = 2;
      row.n = 1;
      row.sample = true;
      row.lookahead = lookahead;
      batch.rows.push_back(row);
    }
    rows.clear();
    for (auto& r : batch.rows) rows.push_back(&r);
  }
};

}  // namespace specd::speculative::testing
