// Gumbel-max sampling with counter-based noise, shared by everyone who must draw the same token:
// the engine's sampler (model.sampler: gumbel), the `coupled` verifier and proposers that draft
// with it (draft_model's draft_sampler: gumbel). The token drawn from p at generated position g
// of a request with seed s is
//
//     argmin_x  E(s, g, x) / p(x),   E = −ln U,  U uniform in (0, 1] from Philox4x32-10
//
// (the exponential-race form of argmax_x log p(x) + Gumbel noise): exactly a draw from p, and
// with the same (s, g) the noise is the same for every distribution, so a draft drawn from q and
// the target's draw from p agree whenever the two races have the same winner. U takes 24 bits
// (as philox_to_unit_float) from the counter (g, x / 4, 0x6d6b), lane x % 4, keyed by s: a
// counter space no other draw uses. Ties go to the lower id; entries with p(x) <= 0 never win.
// CPU only (std::log): the engine's and the plugins' draws agree because both run this code in
// one process.
#pragma once

#include <cmath>
#include <cstdint>

#include "specd/sdk/philox.hpp"

namespace specd::sdk {

// The exponential race over p[0, vocab); -1 when no entry is positive.
inline int32_t gumbel_sample(const float* p, int64_t vocab, uint64_t seed, uint64_t g) {
  int32_t best = -1;
  double best_key = 0.0;
  for (int64_t x0 = 0; x0 < vocab; x0 += 4) {
    const int64_t n = vocab - x0 < 4 ? vocab - x0 : 4;
    bool any = false;
    for (int64_t j = 0; j < n; ++j) any = any || p[x0 + j] > 0.0f;
    if (!any) continue;  // filtered out (top-k, top-p, min-p): no noise needed
    const Philox4x32 ctr{
        {static_cast<uint32_t>(g), static_cast<uint32_t>(g >> 32), static_cast<uint32_t>(x0 / 4), 0x6d6bu}};
    const Philox4x32 r = philox4x32_10(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
    for (int64_t j = 0; j < n; ++j) {
      const float px = p[x0 + j];
      if (!(px > 0.0f)) continue;
      const double u = static_cast<double>((r.v[j] >> 8) + 1u) * (1.0 / 16777216.0);  // (0, 1]
      // -ln u >= 1 - u: a token whose lower bound cannot beat the best so far needs no logarithm
      // (most of a vocabulary, whose probabilities are tiny). Exact: the skipped key is >= best.
      if (best >= 0 && (1.0 - u) / static_cast<double>(px) >= best_key) continue;
      const double key = -std::log(u) / static_cast<double>(px);
      if (best < 0 || key < best_key) {
        best_key = key;
        best = static_cast<int32_t>(x0 + j);
      }
    }
  }
  return best;
}

}  // namespace specd::sdk
