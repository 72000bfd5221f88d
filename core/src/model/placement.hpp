// Where a model computes (LlamaModel's Placement) and how model.device chooses it.
#pragma once

#include <cstdint>
#include <string>

#include "specd/kernels/device.hpp"

namespace specd::model {

// Where a model computes. The CPU path reads the weights in place and keeps its activations in
// host vectors. The device runtime (device_forward.cpp, docs/cuda.md) uploads the weights once
// (DeviceWeights), keeps the activations and the KV cache in the device's memory, uploads each
// call's metadata in one copy and copies back only the logits and hidden states asked for;
// Device::kCuda always takes it. `staged` runs the device runtime on the CPU (host memory as
// the device's): the same kernel calls on the same values as the CPU path, which tests compare
// bit for bit.
struct Placement {
  kernels::Device device = kernels::Device::kCpu;
  bool staged = false;
  // CUDA: a forward shape seen twice is recorded as a graph and replayed from then on
  // (model.cuda_graphs; device_graphs.hpp).
  bool graphs = false;
  bool device_runtime() const { return staged || device != kernels::Device::kCpu; }
};

// model.device (cpu | cuda | cuda:0 | staged) for a target split over tensor_parallel_size
// ranks; graphs on CUDA where cuda_graphs (model.cuda_graphs). Throws specd::Error(kUnsupported) with the reason:
// another CUDA index, no CUDA device here (or a build without CUDA), or a device runtime under tensor parallelism.
Placement resolve_placement(const std::string& device, int32_t tensor_parallel_size, bool cuda_graphs = true);

}  // namespace specd::model
