// The CUDA runtime side of the kernels: device discovery, memory, copies, launch checks.
#include <cuda_runtime.h>

#include <cstdio>
#include <functional>
#include <string>

#include "cuda_ops.hpp"
#include "specd/error.hpp"

#ifndef SPECD_CUDA_ARCHITECTURES
#define SPECD_CUDA_ARCHITECTURES "unknown"
#endif

namespace specd::kernels::cuda {
namespace {

std::string gib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

[[noreturn]] void fail(ErrorCode code, const std::string& what, cudaError_t err) {
  throw Error(code, "cuda: " + what + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

void check(cudaError_t err, const std::string& what) {
  if (err != cudaSuccess) fail(ErrorCode::kInternal, what, err);
}

}  // namespace

int device_count() noexcept {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky "no device / no driver" error
      return 0;
    }
    return n;
  }();
  return count;
}

std::string describe_device() {
  if (device_count() == 0) return "no CUDA device";
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, dev), "cudaGetDeviceProperties");
  return std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " +
         gib(p.totalGlobalMem) + ", " + std::to_string(p.multiProcessorCount) + " SMs)";
}

std::string build_text() {
  return "runtime " + std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10) +
         ", architectures " + SPECD_CUDA_ARCHITECTURES;
}

namespace {
// The stream a DeviceGraph records on, while it records on this thread.
thread_local cudaStream_t recording = nullptr;
}  // namespace

cudaStream_t stream() {
  // The legacy default stream: every op and copy of the process in order. While this thread
  // records a graph: the recording stream (its ops are recorded, not run).
  return recording;
}

void* record_graph(const std::function<void()>& work) {
  if (recording != nullptr) throw Error(ErrorCode::kInternal, "cuda: a graph is already being recorded on this thread");
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  cudaGraph_t graph = nullptr;
  cudaError_t err = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  if (err == cudaSuccess) {
    recording = s;
    try {
      work();
    } catch (...) {
      recording = nullptr;
      cudaStreamEndCapture(s, &graph);
      if (graph != nullptr) cudaGraphDestroy(graph);
      cudaStreamDestroy(s);
      cudaGetLastError();
      throw;
    }
    recording = nullptr;
    err = cudaStreamEndCapture(s, &graph);
  }
  cudaStreamDestroy(s);
  cudaGraphExec_t exec = nullptr;
  if (err == cudaSuccess) err = cudaGraphInstantiate(&exec, graph, 0);
  if (graph != nullptr) cudaGraphDestroy(graph);
  if (err != cudaSuccess) {
    cudaGetLastError();  // recording errors are not sticky: the device works on
    fail(ErrorCode::kInternal, "recording a graph", err);
  }
  return exec;
}

void replay_graph(void* exec) {
  check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), recording), "graph launch");
}

void destroy_graph(void* exec) noexcept {
  if (exec != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec));
}

void* alloc(size_t bytes) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    const std::string free_text =
        cudaMemGetInfo(&free_b, &total_b) == cudaSuccess ? gib(free_b) + " free of " + gib(total_b) : "free unknown";
    fail(ErrorCode::kOutOfMemory, "cannot allocate " + std::to_string(bytes) + " bytes (" + free_text + ")", err);
  }
  return p;
}

void free(void* p) noexcept {
  if (p != nullptr) cudaFree(p);
}

void copy_to_device(void* dst, const void* src, size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "copy of " + std::to_string(bytes) + " bytes to device");
}

void copy_to_host(void* dst, const void* src, size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "copy of " + std::to_string(bytes) + " bytes to host");
}

void copy_on_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()),
        "copy of " + std::to_string(bytes) + " bytes on the device");
}

void copy_rows_on_device(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t rows) {
  if (width == 0 || rows == 0) return;
  check(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, rows, cudaMemcpyDeviceToDevice, stream()),
        "copy of " + std::to_string(rows) + " rows of " + std::to_string(width) + " bytes on the device");
}

void synchronize() {
  check(cudaStreamSynchronize(stream()), "synchronize");
}

void memory_info(size_t* free_bytes, size_t* total_bytes) {
  check(cudaMemGetInfo(free_bytes, total_bytes), "cudaMemGetInfo");
}

void check_launch(std::string_view op) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) fail(ErrorCode::kInternal, "kernel " + std::string(op) + " failed to launch", err);
}

void* scratch(Scratch use, size_t bytes) {
  struct Buffer {
    void* data = nullptr;
    size_t size = 0;
  };
  thread_local Buffer buffers[static_cast<int>(Scratch::kCount)];
  Buffer& b = buffers[static_cast<int>(use)];
  if (b.size < bytes) {
    free(b.data);  // cudaFree waits for the work that may still read it
    b.data = nullptr;
    b.size = 0;
    b.data = alloc(bytes);
    b.size = bytes;
  }
  return b.data;
}

int32_t* error_slot_reset() {
  thread_local int32_t* slot = nullptr;  // one int per thread for the life of the process
  if (slot == nullptr) slot = static_cast<int32_t*>(alloc(sizeof(int32_t)));
  check(cudaMemsetAsync(slot, 0xff, sizeof(int32_t), stream()), "reset of the error slot");
  return slot;
}

int32_t error_slot_read(const int32_t* slot) {
  int32_t value = -1;
  copy_to_host(&value, slot, sizeof value);
  return value;
}

}  // namespace specd::kernels::cuda
