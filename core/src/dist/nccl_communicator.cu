#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "dist/nccl_communicator.hpp"
#include "specd/error.hpp"

namespace specd::dist {
namespace {

void check_cuda(cudaError_t e, const char* call) {
  if (e != cudaSuccess) throw Error(ErrorCode::kUnsupported, std::string(call) + ": " + cudaGetErrorString(e));
}

void check_nccl(ncclResult_t r, const char* call) {
  if (r != ncclSuccess) throw Error(ErrorCode::kInternal, std::string(call) + ": " + ncclGetErrorString(r));
}

// out[i] = ((parts[0][i] + parts[1][i]) + ...) for i < count; parts are [n, count].
__global__ void sum_in_rank_order(const float* parts, long long count, int n, float* out) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    float acc = parts[i];
    for (int r = 1; r < n; ++r) acc += parts[r * count + i];
    out[i] = acc;
  }
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Communicator& bootstrap, int device) : bootstrap_(bootstrap) {
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
    ncclUniqueId id{};
    if (bootstrap_.rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    bootstrap_.broadcast(&id, sizeof id, 0);
    check_nccl(ncclCommInitRank(&comm_, bootstrap_.size(), id, bootstrap_.rank()), "ncclCommInitRank");
  }
  ~NcclCommunicator() override {
    if (parts_ != nullptr) cudaFree(parts_);
    ncclCommDestroy(comm_);
  }

  int rank() const override { return bootstrap_.rank(); }
  int size() const override { return bootstrap_.size(); }
  void set_stream(void* stream) override { stream_ = static_cast<cudaStream_t>(stream); }

  void all_reduce_sum(float* data, int64_t count) override {
    if (size() == 1 || count == 0) return;
    reserve(count * size());
    check_nccl(ncclAllGather(data, parts_, static_cast<size_t>(count), ncclFloat, comm_, stream_), "ncclAllGather");
    const int threads = 256;
    const auto blocks = static_cast<unsigned>(std::min<int64_t>((count + threads - 1) / threads, 4096));
    sum_in_rank_order<<<blocks, threads, 0, stream_>>>(parts_, count, size(), data);
    check_cuda(cudaGetLastError(), "sum_in_rank_order");
  }

  void all_gather(const float* send, float* recv, int64_t count) override {
    check_nccl(ncclAllGather(send, recv, static_cast<size_t>(count), ncclFloat, comm_, stream_), "ncclAllGather");
  }

  void broadcast(void* data, size_t bytes, int root) override {
    check_nccl(ncclBroadcast(data, data, bytes, ncclUint8, root, comm_, stream_), "ncclBroadcast");
  }

  void barrier() override {
    reserve(1);
    check_nccl(ncclAllReduce(parts_, parts_, 1, ncclFloat, ncclSum, comm_, stream_), "ncclAllReduce");
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  [[noreturn]] void abort(const std::string& why) override {
    ncclCommAbort(comm_);
    bootstrap_.abort(why);
    std::abort();  // not reached: the bootstrap's abort ends the job
  }

 private:
  // The all-gather scratch grows to the largest message and stays (no allocation per step).
  void reserve(int64_t floats) {
    if (floats <= capacity_) return;
    if (parts_ != nullptr) check_cuda(cudaFree(parts_), "cudaFree");
    parts_ = nullptr;
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&parts_), static_cast<size_t>(floats) * sizeof(float)),
               "cudaMalloc");
    capacity_ = floats;
  }

  Communicator& bootstrap_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  float* parts_ = nullptr;
  int64_t capacity_ = 0;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device) {
  return std::make_unique<NcclCommunicator>(bootstrap, device);
}

}  // namespace specd::dist
