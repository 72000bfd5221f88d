// The allowed_tokens host service (ABI 1.5) during one propose call: answers for the sequences
// of the call's rows from their structured-output state (constrain/constraint.hpp).
#pragma once

#include <span>

#include "plugin/host_services.hpp"
#include "sched/scheduler.hpp"

namespace specd::speculative {

class ProposeGrammar final : public plugin::GrammarSource {
 public:
  explicit ProposeGrammar(std::span<sched::StepRow* const> rows) : rows_(rows) {}
  // True when some row's request is constrained (else the service need not be offered).
  bool any() const;
  int32_t allowed_tokens(uint64_t seq_id, std::span<const int32_t> prefix, std::span<uint64_t> mask) const override;

 private:
  std::span<sched::StepRow* const> rows_;
};

}  // namespace specd::speculative
