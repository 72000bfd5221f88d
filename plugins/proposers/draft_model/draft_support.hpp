// Pieces shared by the model-backed proposers (draft_model, mtp): a C++ face over the host's
// model services (every failed call becomes specd::sdk::Error carrying the host's message) and
// the choice of a draft token from a row of logits (greedy, or an inverse-CDF sample driven by
// the request's Philox stream). Header-only, built into each plugin; SDK headers only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <specd/sdk/philox.hpp>
#include <specd/sdk/plugin.hpp>
#include <string>

namespace specd::proposers {

// Philox lane used to sample drafts; lanes 0 and 1 belong to the verifier (philox.hpp).
inline constexpr int kDraftLane = 2;

// The model services table plus the host context every call needs. Does not own models.
class ModelClient {
 public:
  // Throws when the table lacks a function this client uses.
  ModelClient(const specd_model_services& services, void* host_ctx, const char* component)
      : s_(&services), ctx_(host_ctx), component_(component) {
    if (s_->load == nullptr || s_->load_mtp == nullptr || s_->release == nullptr || s_->info == nullptr ||
        s_->forward == nullptr || s_->seq_length == nullptr || s_->truncate == nullptr || s_->drop_sequence == nullptr)
      throw sdk::Error(component_ + ": the host's model services table is incomplete", SPECD_ERR_UNSUPPORTED);
  }

  // path "" = the engine's target model; num_layers > 0 keeps only the first layers;
  // dtype is a specd_dtype or -1 for the checkpoint's own.
  specd_model* load(const std::string& path, int32_t num_layers, int32_t dtype) {
    specd_model_load_options options{};
    options.struct_size = sizeof(options);
    options.path = path.c_str();
    options.num_layers = num_layers;
    options.dtype = dtype;
    specd_model* model = nullptr;
    Status st;
    check(s_->load(ctx_, &options, &model, &st.err), st,
          path.empty() ? std::string("loading the target model") : "loading model \"" + path + "\"");
    if (model == nullptr) throw sdk::Error(component_ + ": model services returned no model", SPECD_ERR_INTERNAL);
    return model;
  }

  specd_model* load_mtp(specd_model* target, int32_t module) {
    specd_model* model = nullptr;
    Status st;
    check(s_->load_mtp(ctx_, target, module, &model, &st.err), st, "loading MTP module " + std::to_string(module));
    if (model == nullptr) throw sdk::Error(component_ + ": model services returned no MTP module", SPECD_ERR_INTERNAL);
    return model;
  }

  void release(specd_model* model) noexcept {
    if (model != nullptr) s_->release(ctx_, model);
  }

  specd_model_info info(const specd_model* model) const {
    specd_model_info out{};
    out.struct_size = sizeof(out);
    const int32_t status = s_->info(ctx_, model, &out);
    if (status != SPECD_OK) throw sdk::Error(component_ + ": reading model info failed", status);
    return out;
  }

  void forward(specd_model* model, const specd_forward_batch& batch) {
    Status st;
    check(s_->forward(ctx_, model, &batch, &st.err), st, "forward");
  }

  int64_t seq_length(const specd_model* model, uint64_t seq_id) const { return s_->seq_length(ctx_, model, seq_id); }

  void truncate(specd_model* model, uint64_t seq_id, int64_t new_length) {
    Status st;
    check(s_->truncate(ctx_, model, seq_id, new_length, &st.err), st,
          "truncating sequence " + std::to_string(seq_id) + " to " + std::to_string(new_length));
  }

  void drop(specd_model* model, uint64_t seq_id) noexcept { s_->drop_sequence(ctx_, model, seq_id); }

  const std::string& component() const { return component_; }

 private:
  struct Status {
    char message[1024] = {};
    specd_error err{sizeof(specd_error), sizeof(message), message};
  };
  void check(int32_t status, const Status& st, const std::string& what) const {
    if (status == SPECD_OK) return;
    throw sdk::Error(component_ + ": " + what + " failed: " + (st.message[0] != '\0' ? st.message : "no message"),
                     status);
  }

  const specd_model_services* s_;
  void* ctx_;
  std::string component_;
};

// Index of the largest logit; the lowest id wins ties.
inline int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t v = 1; v < logits.size(); ++v)
    if (logits[v] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(v);
  return best;
}

// probs = softmax(logits / temperature), temperature > 0. probs has logits.size() entries.
inline void softmax(std::span<const float> logits, float temperature, std::span<float> probs) {
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (size_t v = 0; v < logits.size(); ++v) {
    probs[v] = std::exp((logits[v] - max) / temperature);
    sum += probs[v];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (float& p : probs) p *= inv;
}

// Inverse CDF: the smallest t with probs[0] + ... + probs[t] > u (float running sum, ids in
// order). When rounding leaves the total at or below u, the last token with nonzero mass.
inline int32_t sample_inverse_cdf(std::span<const float> probs, float u) {
  float cdf = 0;
  int32_t last_nonzero = 0;
  for (size_t t = 0; t < probs.size(); ++t) {
    if (probs[t] <= 0) continue;
    cdf += probs[t];
    last_nonzero = static_cast<int32_t>(t);
    if (cdf > u) return last_nonzero;
  }
  return last_nonzero;
}

// Draft j of a sequence from its logits row: greedy when temperature == 0, else a sample from
// softmax(logits / temperature) with u = philox_uniform(seed, step, j, kDraftLane); the
// probability row is written to probs (which must then be non-empty).
inline int32_t choose_draft(std::span<const float> logits, float temperature, uint64_t seed, uint64_t step, int32_t j,
                            std::span<float> probs) {
  if (temperature <= 0) return argmax(logits);
  softmax(logits, temperature, probs);
  return sample_inverse_cdf(probs, sdk::philox_uniform(seed, step, static_cast<uint32_t>(j), kDraftLane));
}

// The `temperature` parameter both proposers share.
inline float read_temperature(sdk::Params& params) {
  return static_cast<float>(params.get_float("temperature", 0.0, 0.0, 1.0e4));
}

}  // namespace specd::proposers
