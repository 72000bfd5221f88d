// Mixture-of-experts MLP weights (ModelConfig::moe): the router and the experts of one layer.
//
// Hugging Face checkpoints hold one tensor per expert and projection
// (Qwen3-MoE: mlp.experts.<e>.{gate,up,down}_proj.weight, router mlp.gate.weight; Mixtral:
// block_sparse_moe.experts.<e>.{w1,w3,w2}.weight, router block_sparse_moe.gate.weight); GGUF
// files hold each projection of all experts in one [experts, rows, cols] tensor, presented under
// the same names without the expert index (gguf_checkpoint.cpp). Either way every expert
// becomes a WeightView of its own: in place in the merged tensor when its dtype is kept and the
// weights are mapped, else converted into owned memory like any matrix.
#include <string>

#include "model/weights.hpp"
#include "specd/error.hpp"

namespace specd::model {

namespace {

struct ExpertNames {
  std::string router, gate, up, down;  // without ".weight"
};

ExpertNames expert_names(const std::string& p, Architecture arch) {
  if (arch == Architecture::kMixtral)
    return {p + "block_sparse_moe.gate", p + "block_sparse_moe.experts.w1", p + "block_sparse_moe.experts.w3",
            p + "block_sparse_moe.experts.w2"};
  return {p + "mlp.gate", p + "mlp.experts.gate_proj", p + "mlp.experts.up_proj", p + "mlp.experts.down_proj"};
}

// "<...>.experts.w1" -> "<...>.experts.<e>.w1.weight"
std::string per_expert(const std::string& merged, int64_t e) {
  const size_t dot = merged.rfind('.');
  return merged.substr(0, dot) + "." + std::to_string(e) + merged.substr(dot) + ".weight";
}

// Expert e of a merged [experts, rows, cols] tensor, as a 2-D tensor of its own.
TensorView expert_slice(const TensorView& merged, int64_t e, int64_t experts) {
  TensorView t = merged;
  t.name = merged.name + "[" + std::to_string(e) + "]";
  t.shape = {merged.shape[1], merged.shape[2]};
  t.nbytes = merged.nbytes / static_cast<size_t>(experts);
  t.data = merged.data + static_cast<size_t>(e) * t.nbytes;
  return t;
}

}  // namespace

void LlamaWeights::load_experts(const std::string& p, int64_t index, LayerWeights& l) {
  const ModelConfig& c = config();
  const int64_t H = c.hidden_size, I = c.moe->expert_intermediate, E = c.moe->num_experts;
  const auto want = [&](LayerMatrix m) { return requested_.layer(m, index, c.num_layers); };
  const Slice mlp_part{shard_.rank * dims_.intermediate, dims_.intermediate};
  const ExpertNames n = expert_names(p, c.arch);
  l.router = matrix(n.router + ".weight", E, H, DType::kF32);
  l.experts.resize(static_cast<size_t>(E));
  const bool merged = checkpoint_->find(n.gate + ".weight") != nullptr;
  struct Part {
    const std::string* name;
    int64_t rows, cols;
    LayerMatrix kind;
    WeightView ExpertWeights::*out;
  };
  const Part parts[] = {{&n.gate, I, H, LayerMatrix::kGate, &ExpertWeights::gate},
                        {&n.up, I, H, LayerMatrix::kUp, &ExpertWeights::up},
                        {&n.down, H, I, LayerMatrix::kDown, &ExpertWeights::down}};
  for (const Part& part : parts) {
    // Column-parallel gate/up (this rank's rows), row-parallel down (this rank's columns).
    const Slice rows = part.kind == LayerMatrix::kDown ? Slice{} : mlp_part;
    const Slice cols = part.kind == LayerMatrix::kDown ? mlp_part : Slice{};
    const TensorView* all = merged ? &checkpoint_->require(*part.name + ".weight", {E, part.rows, part.cols}) : nullptr;
    for (int64_t e = 0; e < E; ++e) {
      ExpertWeights& x = l.experts[static_cast<size_t>(e)];
      if (all != nullptr) {
        x.*part.out = matrix_of(expert_slice(*all, e, E), part.rows, part.cols, want(part.kind), rows, cols);
      } else {
        x.*part.out = matrix(per_expert(*part.name, e), part.rows, part.cols, want(part.kind), rows, cols);
      }
    }
  }
}

size_t LlamaWeights::expert_bytes(int64_t layer_index) const {
  const LayerWeights& l = layer(layer_index);
  if (l.experts.empty()) return 0;
  size_t total = 0;
  for (const ExpertWeights& e : l.experts) total += e.gate.bytes() + e.up.bytes() + e.down.bytes();
  return total / l.experts.size();
}

}  // namespace specd::model
