#include "model/placement.hpp"

#include "specd/error.hpp"

namespace specd::model {

Placement resolve_placement(const std::string& d, int32_t tensor_parallel_size, bool cuda_graphs) {
  if (d == "cpu") return {};
  if (tensor_parallel_size > 1) {
    throw Error(ErrorCode::kUnsupported, "model.device: \"" + d + "\" runs on one device; tensor_parallel_size " +
                                             std::to_string(tensor_parallel_size) + " is for model.device: cpu");
  }
  if (d == "staged") return {kernels::Device::kCpu, true};
  if (d != "cuda" && d != "cuda:0") {
    throw Error(ErrorCode::kUnsupported, "model.device: \"" + d +
                                             "\": only the first CUDA device is addressed yet (cuda or cuda:0); "
                                             "CUDA_VISIBLE_DEVICES chooses which GPU that is");
  }
  if (!kernels::device_available(kernels::Device::kCuda)) {
    throw Error(ErrorCode::kUnsupported, "model.device: \"" + d + "\": no CUDA device can be used here (" +
                                             kernels::device_description(kernels::Device::kCuda) + ")");
  }
  return {kernels::Device::kCuda, false, cuda_graphs};
}

}  // namespace specd::model
