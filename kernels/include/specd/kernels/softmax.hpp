// Row-wise softmax and log-softmax, numerically stable (the row maximum is subtracted). The one
// implementation of both: sampling turns logits into probabilities with softmax, prompt scoring
// uses log_softmax.
#pragma once

#include <cstdint>

#include "specd/kernels/device.hpp"

namespace specd::kernels {

// out = softmax(x / temperature) per row; x, out [rows, cols] (may alias); temperature > 0
// (anything else is rejected with specd::Error(kInvalidArgument)). exp((x - max) / temperature)
// runs on the active CPU ISA level's vectorized exp (relative error ~2e-7 per element). A row
// whose entries are all -inf has no distribution and is rejected with
// specd::Error(kInvalidArgument).
void softmax(Device device, const float* x, float* out, int64_t rows, int64_t cols, float temperature = 1.0f);

// out = log_softmax(x) per row (used to score prompts); x, out [rows, cols] (may alias).
void log_softmax(Device device, const float* x, float* out, int64_t rows, int64_t cols);

namespace reference {
void softmax(const float* x, float* out, int64_t rows, int64_t cols);
}  // namespace reference

}  // namespace specd::kernels
