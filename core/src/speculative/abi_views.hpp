// The core's data as the plugin ABI's views (specd_sequence, specd_tensor_view), shared by the
// proposer, verifier and scorer stages.
#pragma once

#include <cstdint>

#include "sched/scheduler.hpp"
#include "specd/sdk/abi.h"

namespace specd::speculative {

// The sequence's first num_tokens tokens as a component sees them.
inline specd_sequence abi_sequence(const sched::Sequence& s, int64_t num_tokens) {
  specd_sequence out{};
  out.struct_size = sizeof(out);
  out.seq_id = s.id;
  out.tokens = {s.tokens.data(), num_tokens};
  out.num_prompt = s.num_prompt;
  out.seed = s.seed;
  out.step = s.step();
  out.temperature = s.params.temperature;
  out.tenant = s.tenant;
  return out;
}

// An f32 CPU matrix [rows, hidden].
inline specd_tensor_view hidden_view(float* data, int64_t rows, int64_t hidden) {
  specd_tensor_view v{};
  v.struct_size = sizeof(v);
  v.data = data;
  v.dtype = SPECD_DTYPE_F32;
  v.device = {SPECD_DEVICE_CPU, 0};
  v.ndim = 2;
  v.shape[0] = rows;
  v.shape[1] = hidden;
  return v;
}

}  // namespace specd::speculative
