// Philox4x32-10 counter-based random numbers (Salmon et al., "Parallel random numbers: as easy
// as 1, 2, 3", SC'11). Header-only and usable from CUDA device code, so CPU and GPU
// verifiers draw bit-identical uniforms for the same (seed, step, position).
//
// The stream of a request is keyed by its 64-bit seed; the counter is (step, position, lane
// group), so a draw depends only on the request and where it is in its own generation —
// never on which other requests share the batch.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define SPECD_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define SPECD_HOST_DEVICE inline
#endif

namespace specd::sdk {

struct Philox4x32 {
  uint32_t v[4];
};

SPECD_HOST_DEVICE uint32_t philox_mulhilo(uint32_t a, uint32_t b, uint32_t* hi) {
  const uint64_t p = static_cast<uint64_t>(a) * static_cast<uint64_t>(b);
  *hi = static_cast<uint32_t>(p >> 32);
  return static_cast<uint32_t>(p);
}

// Ten rounds of Philox4x32 on counter c with key k.
SPECD_HOST_DEVICE Philox4x32 philox4x32_10(Philox4x32 c, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, hi1;
    const uint32_t lo0 = philox_mulhilo(kM0, c.v[0], &hi0);
    const uint32_t lo1 = philox_mulhilo(kM1, c.v[2], &hi1);
    c = Philox4x32{{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
    k0 += kW0;
    k1 += kW1;
  }
  return c;
}

// 24 random bits → float uniform in [0, 1). Exactly representable, identical on every device.
SPECD_HOST_DEVICE float philox_to_unit_float(uint32_t x) {
  return static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
}

// Four independent uniforms in [0, 1) for (seed, step, position). Lane use by convention:
// [0] acceptance test of draft `position`, [1] sampling the token emitted at `position`,
// [2], [3] free for plugins.
SPECD_HOST_DEVICE void philox_uniforms(uint64_t seed, uint64_t step, uint32_t position, float out[4]) {
  const Philox4x32 ctr{{static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32), position, 0x5eedu}};
  const Philox4x32 r = philox4x32_10(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  for (int i = 0; i < 4; ++i) out[i] = philox_to_unit_float(r.v[i]);
}

enum PhiloxLane : int { kLaneAccept = 0, kLaneSample = 1 };

SPECD_HOST_DEVICE float philox_uniform(uint64_t seed, uint64_t step, uint32_t position, int lane) {
  float u[4];
  philox_uniforms(seed, step, position, u);
  return u[lane & 3];
}

}  // namespace specd::sdk
