// A C++ face over the host's model services (specd_model_services): every failed call becomes
// specd::sdk::Error carrying the host's message. Used by model-backed plugins (draft_model and
// mtp proposers, the batch_expansion scorer). Does not own models: callers release what they
// load. One client serves one component instance (one thread at a time).
#pragma once

#include <cstdint>
#include <string>

#include "specd/sdk/abi.h"
#include "specd/sdk/error.hpp"

namespace specd::sdk {

class ModelClient {
 public:
  // Throws when the table lacks a function this client uses. `component` prefixes messages.
  ModelClient(const specd_model_services& services, void* host_ctx, std::string component)
      : s_(&services), ctx_(host_ctx), component_(std::move(component)) {
    if (s_->load == nullptr || s_->load_mtp == nullptr || s_->release == nullptr || s_->info == nullptr ||
        s_->forward == nullptr || s_->seq_length == nullptr || s_->truncate == nullptr || s_->drop_sequence == nullptr)
      throw Error(component_ + ": the host's model services table is incomplete", SPECD_ERR_UNSUPPORTED);
  }
  ModelClient(const ModelClient&) = delete;
  ModelClient& operator=(const ModelClient&) = delete;

  // path "" = the engine's target model; num_layers > 0 keeps only the first layers;
  // dtype is a specd_dtype or -1 for the checkpoint's own.
  specd_model* load(const std::string& path, int32_t num_layers, int32_t dtype) {
    specd_model_load_options options{};
    options.struct_size = sizeof(options);
    options.path = path.c_str();
    options.num_layers = num_layers;
    options.dtype = dtype;
    specd_model* model = nullptr;
    check(s_->load(ctx_, &options, &model, arm()),
          path.empty() ? std::string("loading the target model") : "loading model \"" + path + "\"");
    if (model == nullptr) throw Error(component_ + ": model services returned no model", SPECD_ERR_INTERNAL);
    return model;
  }

  specd_model* load_mtp(specd_model* target, int32_t module) {
    specd_model* model = nullptr;
    check(s_->load_mtp(ctx_, target, module, &model, arm()), "loading MTP module " + std::to_string(module));
    if (model == nullptr) throw Error(component_ + ": model services returned no MTP module", SPECD_ERR_INTERNAL);
    return model;
  }

  void release(specd_model* model) noexcept {
    if (model != nullptr) s_->release(ctx_, model);
  }

  specd_model_info info(const specd_model* model) const {
    specd_model_info out{};
    out.struct_size = sizeof(out);
    const int32_t status = s_->info(ctx_, model, &out);
    if (status != SPECD_OK) throw Error(component_ + ": reading model info failed", status);
    return out;
  }

  void forward(specd_model* model, const specd_forward_batch& batch) {
    check(s_->forward(ctx_, model, &batch, arm()), "forward");
  }

  int64_t seq_length(const specd_model* model, uint64_t seq_id) const { return s_->seq_length(ctx_, model, seq_id); }

  void truncate(specd_model* model, uint64_t seq_id, int64_t new_length) {
    check(s_->truncate(ctx_, model, seq_id, new_length, arm()),
          "truncating sequence " + std::to_string(seq_id) + " to " + std::to_string(new_length));
  }

  void drop(specd_model* model, uint64_t seq_id) noexcept { s_->drop_sequence(ctx_, model, seq_id); }

  const std::string& component() const { return component_; }

 private:
  // The error buffer is reused: only its first byte is reset before a call, so a host that
  // fails without a message is reported as such (no per-call zeroing of the whole buffer).
  specd_error* arm() {
    message_[0] = '\0';
    return &err_;
  }
  void check(int32_t status, const std::string& what) const {
    if (status == SPECD_OK) return;
    throw Error(component_ + ": " + what + " failed: " + (message_[0] != '\0' ? message_ : "no message"), status);
  }

  const specd_model_services* s_;
  void* ctx_;
  std::string component_;
  char message_[1024];
  specd_error err_{sizeof(specd_error), sizeof(message_), message_};
};

}  // namespace specd::sdk
