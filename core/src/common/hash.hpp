// Stable 64-bit hashing: the same value on every platform, compiler and standard library (unlike
// std::hash), for seeds and assignments that must survive restarts and rebuilds.
#pragma once

#include <cstdint>
#include <string_view>

namespace specd {

// SplitMix64's finalizer: a bijective mixer of 64-bit values.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// FNV-1a over the bytes of s.
inline uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

// A request's tenant (SpeculativeOptions::tenant) as the plugin ABI's specd_sequence.tenant:
// 0 for "", else a non-zero stable hash.
inline uint64_t tenant_key(std::string_view tenant) {
  if (tenant.empty()) return 0;
  const uint64_t h = splitmix64(fnv1a64(tenant));
  return h != 0 ? h : 1;
}

}  // namespace specd
