#include "plugin/host_services.hpp"

#include <cstdlib>
#include <new>

#include "specd/log.hpp"

#ifdef SPECD_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace specd::plugin {
namespace {

log::Level to_level(int32_t level) {
  if (level <= SPECD_LOG_TRACE) return log::Level::kTrace;
  if (level >= SPECD_LOG_ERROR) return log::Level::kError;
  return static_cast<log::Level>(level);
}

int32_t log_enabled(void* ctx, int32_t level) {
  return static_cast<HostContext*>(ctx)->logger().should_log(to_level(level)) ? 1 : 0;
}

void log_write(void* ctx, int32_t level, const char* message, size_t length) {
  if (message == nullptr) return;
  static_cast<HostContext*>(ctx)->logger().write(to_level(level), std::string_view(message, length));
}

void* alloc(void*, specd_device device, size_t bytes, size_t alignment) {
  if (alignment == 0) alignment = 64;
  if ((alignment & (alignment - 1)) != 0) return nullptr;
  if (device.type == SPECD_DEVICE_CPU) {
    const size_t rounded = (bytes + alignment - 1) / alignment * alignment;
    return std::aligned_alloc(alignment, rounded == 0 ? alignment : rounded);
  }
#ifdef SPECD_WITH_CUDA
  if (device.type == SPECD_DEVICE_CUDA) {
    void* ptr = nullptr;
    if (cudaSetDevice(device.index) != cudaSuccess || cudaMalloc(&ptr, bytes) != cudaSuccess) return nullptr;
    return ptr;
  }
#endif
  return nullptr;
}

void release(void*, specd_device device, void* ptr) {
  if (ptr == nullptr) return;
  if (device.type == SPECD_DEVICE_CPU) {
    std::free(ptr);
    return;
  }
#ifdef SPECD_WITH_CUDA
  if (device.type == SPECD_DEVICE_CUDA) cudaFree(ptr);
#endif
}

// Components run on the device's default stream until the CUDA backend hands out its own.
void* device_stream(void*, specd_device) {
  return nullptr;
}

void record(void* ctx, const char* name, double value) {
  auto* c = static_cast<HostContext*>(ctx);
  c->observations().record(name, value, c->logger());
}

int32_t allowed_tokens(void* ctx, uint64_t seq_id, const int32_t* prefix, int32_t n_prefix, uint64_t* mask,
                       int64_t mask_words) {
  const GrammarSource* g = static_cast<HostContext*>(ctx)->grammar();
  if (g == nullptr) return 0;
  if (n_prefix < 0 || (n_prefix > 0 && prefix == nullptr) || mask == nullptr || mask_words <= 0) return -1;
  return g->allowed_tokens(seq_id, {prefix, static_cast<size_t>(n_prefix)}, {mask, static_cast<size_t>(mask_words)});
}

}  // namespace

HostContext::HostContext(const std::string& plugin_name, ModelBinding models, bool offers_record)
    : logger_(&log::get("plugin." + plugin_name)), plugin_name_(plugin_name), models_(models) {
  services_.struct_size = sizeof(services_);
  services_.host_abi_minor = SPECD_ABI_MINOR;
  services_.host_ctx = this;
  services_.log_enabled = &log_enabled;
  services_.log = &log_write;
  services_.alloc = &alloc;
  services_.free = &release;
  services_.device_stream = &device_stream;
  services_.models = models.table;
  services_.record = offers_record ? &record : nullptr;
  services_.allowed_tokens = offers_record ? &allowed_tokens : nullptr;
}

int host_cuda_runtime_major() {
#ifdef SPECD_WITH_CUDA
  return CUDART_VERSION / 1000;
#else
  return 0;
#endif
}

}  // namespace specd::plugin
