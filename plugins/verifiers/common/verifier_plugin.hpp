// The device dispatch every in-tree verifier plugin shares: the batch's `device` field picks
// the CPU reference or the plugin's CUDA kernel; a failed Status becomes specd::sdk::Error,
// which the SDK turns into the ABI status code and message.
#pragma once

#include <specd/sdk/plugin.hpp>

#include <string>
#include <utility>

#include "verify_cpu.hpp"

namespace specd::verifiers {

#ifdef SPECD_PLUGIN_WITH_CUDA
inline constexpr bool kBuiltWithCuda = true;
#else
inline constexpr bool kBuiltWithCuda = false;
#endif

inline void raise_if_failed(Status status) {
  if (!status.ok()) throw sdk::Error(std::move(status.message), status.code);
}

// What a CUDA batch gets from a plugin built without CUDA.
inline Status built_without_cuda(const char* verifier) {
  return {SPECD_ERR_UNSUPPORTED, std::string("verifier '") + verifier +
                                     "' was built without CUDA and cannot verify a batch on a CUDA device"};
}

// Runs cpu() or cuda() (both return Status) according to batch.device.type.
template <class Cpu, class Cuda>
void dispatch(const char* verifier, const specd_verify_batch& batch, Cpu&& cpu, Cuda&& cuda) {
  switch (batch.device.type) {
    case SPECD_DEVICE_CPU:
      raise_if_failed(cpu());
      return;
    case SPECD_DEVICE_CUDA:
      raise_if_failed(cuda());
      return;
    default:
      throw sdk::Error(std::string("verifier '") + verifier + "': unknown device type " +
                           std::to_string(batch.device.type),
                       SPECD_ERR_INVALID_ARGUMENT);
  }
}

}  // namespace specd::verifiers
