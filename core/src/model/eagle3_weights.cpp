// LlamaWeights::load_eagle3: an EAGLE-3 draft head in the public checkpoint layout (the one vLLM
// and SGLang load for Llama targets; docs/model-formats.md "EAGLE-3 heads").
#include <string>
#include <utility>

#include "model/weights.hpp"
#include "specd/error.hpp"

namespace specd::model {

std::shared_ptr<const LlamaWeights> LlamaWeights::load_eagle3(std::shared_ptr<const Checkpoint> head,
                                                              std::shared_ptr<const LlamaWeights> target,
                                                              WeightDTypes dtype) {
  SPECD_CHECK(head != nullptr && target != nullptr, ErrorCode::kInternal, "LlamaWeights::load_eagle3: null argument");
  const ModelConfig& c = head->config();
  const std::string where = head->dir().string();
  if (!c.eagle3)
    throw Error(ErrorCode::kInvalidArgument, where + " is not an EAGLE-3 head (config.json architectures)");
  if (target->is_mtp() || target->is_eagle3())
    throw Error(ErrorCode::kInvalidArgument, "an EAGLE-3 head drafts for a model, not for another draft head");
  const ModelConfig& t = target->config();
  if (c.vocab_size != t.vocab_size)
    throw Error(ErrorCode::kModelFormat, where + ": the head's vocab_size " + std::to_string(c.vocab_size) +
                                             " is not the target's " + std::to_string(t.vocab_size));
  if (c.eagle3->target_hidden_size != t.hidden_size)
    throw Error(ErrorCode::kModelFormat,
                where + ": the head fuses states of width " + std::to_string(c.eagle3->target_hidden_size) +
                    " (target_hidden_size) but the target's hidden size is " + std::to_string(t.hidden_size));

  std::shared_ptr<LlamaWeights> w(new LlamaWeights());
  w->checkpoint_ = std::move(head);
  w->requested_ = dtype;
  w->placement_ = WeightPlacement::kCopy;
  w->dims_ = ShardDims::of(c, {});
  const int64_t H = c.hidden_size, V = c.vocab_size, Vd = c.eagle3->draft_vocab_size;
  const std::optional<DType> base = dtype.base;
  for (const char* name : {"embed_tokens.weight", "model.embed_tokens.weight"}) {
    if (w->checkpoint_->find(name) == nullptr) continue;
    w->embed_ = w->matrix(name, V, H, dtype.embeddings());
    break;
  }
  if (w->embed_.data == nullptr) {  // the target's embeddings (the usual case: the head has none)
    if (t.hidden_size != H)
      throw Error(ErrorCode::kModelFormat, where + ": no embed_tokens.weight, and the target's embeddings are " +
                                               std::to_string(t.hidden_size) + " wide, not the head's " +
                                               std::to_string(H));
    if (target->shard().size > 1) {
      // Under tensor parallelism the target's embedding rows are split by vocabulary over its
      // ranks; the head runs on rank 0 alone and reads a whole copy from the target's checkpoint.
      const std::shared_ptr<const Checkpoint> own = std::exchange(w->checkpoint_, target->checkpoint_);
      w->embed_ = w->matrix("model.embed_tokens.weight", V, H, target->requested_dtype().embeddings());
      w->checkpoint_ = own;
    } else {
      w->embed_ = target->embed();
      w->base_ = target;
    }
  }
  w->fc_ = w->matrix("fc.weight", H, 3 * t.hidden_size, base);
  w->hidden_norm_ = w->vector("midlayer.hidden_norm.weight", H);
  w->layers_.resize(1);
  w->load_layer("midlayer.", -1, w->layers_[0], 2 * H);
  w->final_norm_ = w->vector("norm.weight", H);
  w->lm_head_ = w->matrix("lm_head.weight", Vd, H, dtype.lm_head());
  const std::vector<int64_t> d2t = w->checkpoint_->require_i64("d2t", {Vd});
  w->d2t_.resize(static_cast<size_t>(Vd));
  for (int64_t i = 0; i < Vd; ++i) {
    const int64_t id = i + d2t[static_cast<size_t>(i)];
    if (id < 0 || id >= V)
      throw Error(ErrorCode::kModelFormat, where + ": d2t[" + std::to_string(i) +
                                               "] = " + std::to_string(d2t[static_cast<size_t>(i)]) +
                                               " maps draft token " + std::to_string(i) + " to " + std::to_string(id) +
                                               ", outside the target's vocabulary [0, " + std::to_string(V) + ")");
    w->d2t_[static_cast<size_t>(i)] = static_cast<int32_t>(id);
  }
  w->dtype_ = base ? *base : w->layers_dtype();
  return w;
}

}  // namespace specd::model
