#include "specd/kernels/device_graph.hpp"

#include <string>
#include <utility>

#include "specd/error.hpp"

#ifdef SPECD_WITH_CUDA
#include "../cuda/cuda_ops.hpp"
#endif

namespace specd::kernels {

DeviceGraph::~DeviceGraph() {
#ifdef SPECD_WITH_CUDA
  cuda::destroy_graph(exec_);
#endif
}

DeviceGraph::DeviceGraph(DeviceGraph&& o) noexcept : exec_(std::exchange(o.exec_, nullptr)) {}

DeviceGraph& DeviceGraph::operator=(DeviceGraph&& o) noexcept {
  if (this != &o) {
#ifdef SPECD_WITH_CUDA
    cuda::destroy_graph(exec_);
#endif
    exec_ = std::exchange(o.exec_, nullptr);
  }
  return *this;
}

DeviceGraph DeviceGraph::record(Device device, const std::function<void()>& work) {
  if (device != Device::kCuda || !device_available(device))
    throw Error(ErrorCode::kUnsupported,
                "device graphs: " + std::string(device_name(device)) + " does not record graphs (CUDA devices only)");
  DeviceGraph g;
#ifdef SPECD_WITH_CUDA
  g.exec_ = cuda::record_graph(work);
#endif
  return g;
}

void DeviceGraph::replay() const {
  if (exec_ == nullptr) throw Error(ErrorCode::kInternal, "device graphs: replay of an empty graph");
#ifdef SPECD_WITH_CUDA
  cuda::replay_graph(exec_);
#endif
}

}  // namespace specd::kernels
