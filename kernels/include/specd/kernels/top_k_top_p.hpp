// Top-k and top-p (nucleus) filtering of probability rows: the one implementation both plain
// sampling and the speculative verifier's target distribution use (through sampling/).
#pragma once

#include <cstdint>

#include "specd/kernels/device.hpp"

namespace specd::kernels {

// In place on probs [rows, cols] (non-negative, not necessarily normalised). Entries are ranked
// by descending probability, ties by lower index, so results are deterministic.
//  - top_k in [1, cols): keeps the top_k highest entries of each row and zeroes the rest;
//    top_k <= 0 or >= cols keeps every entry.
//  - top_p in (0, 1): then keeps, in rank order, each entry while the mass ranked before it is
//    below top_p times the mass that top-k kept (the first entry always stays); top_p == 1
//    keeps every entry.
// Rows are not renormalised. top_p outside (0, 1] is rejected with specd::Error(kInvalidArgument).
void top_k_top_p(Device device, float* probs, int64_t rows, int64_t cols, int32_t top_k, float top_p);

// The ids of the k largest entries of x [cols], most likely first, ranked as top_k_top_p ranks
// them (ties: lower index); out [k]. k in [1, cols] (else specd::Error(kInvalidArgument)). Used
// for the top log-probabilities a request asks for.
void top_k_indices(Device device, const float* x, int64_t cols, int32_t k, int32_t* out);

}  // namespace specd::kernels
