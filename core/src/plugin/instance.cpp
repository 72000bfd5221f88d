#include "plugin/instance.hpp"

#include "specd/error.hpp"

namespace specd::plugin {
std::string status_name(int32_t status) {
  switch (status) {
    case SPECD_ERR_INVALID_ARGUMENT:
      return "invalid argument";
    case SPECD_ERR_UNSUPPORTED:
      return "unsupported";
    case SPECD_ERR_OUT_OF_MEMORY:
      return "out of memory";
    case SPECD_ERR_NOT_FOUND:
      return "not found";
    case SPECD_ERR_INTERNAL:
      return "internal error";
    default:
      return "status " + std::to_string(status);
  }
}

template <class Vtable>
void Instance<Vtable>::refuse(const std::string& what) {
  if (vt_.destroy != nullptr) vt_.destroy(self_);
  vt_.destroy = nullptr;
  throw Error(ErrorCode::kPluginLoad, kind_ + " '" + name_ + "' " + what);
}

template <class Vtable>
void Instance<Vtable>::fail_call(const char* what, int32_t status) const {
  throw Error(ErrorCode::kPluginCall, kind_ + " '" + name_ + "' " + what + " failed (" + status_name(status) +
                                          "): " + (error_[0] != '\0' ? std::string(error_) : "(no message)"));
}

template class Instance<specd_proposer_vtable>;
template class Instance<specd_verifier_vtable>;
template class Instance<specd_scorer_vtable>;

ProposerInstance::ProposerInstance(CreatedComponent c) : Instance("proposer", std::move(c)) {
  require(&specd_proposer_vtable::propose, "has no propose function");
  caps_.struct_size = sizeof(caps_);
  caps_.supports_variable_k = 1;
  read_capabilities(caps_);
}

void ProposerInstance::on_prefill(const specd_prefill_batch& batch) {
  if (vt_.on_prefill != nullptr) call(&specd_proposer_vtable::on_prefill, "on_prefill", &batch);
}

void ProposerInstance::propose(specd_propose_batch& batch, const GrammarSource* grammar) {
  struct Scope {  // the service answers only during this call, whatever it throws
    HostContext& ctx;
    ~Scope() { ctx.set_grammar(nullptr); }
  } scope{mutable_context()};
  mutable_context().set_grammar(grammar);
  call(&specd_proposer_vtable::propose, "propose", &batch);
}

void ProposerInstance::on_accept(uint64_t seq_id, int32_t num_accepted, specd_token_view emitted) {
  if (vt_.on_accept != nullptr) call(&specd_proposer_vtable::on_accept, "on_accept", seq_id, num_accepted, emitted);
}

void ProposerInstance::on_release(uint64_t seq_id) noexcept {
  if (vt_.on_release != nullptr) vt_.on_release(self_, seq_id);
}

void ProposerInstance::on_finish(const specd_sequence& seq) noexcept {
  if (vt_.on_finish != nullptr) vt_.on_finish(self_, &seq);
}

VerifierInstance::VerifierInstance(CreatedComponent c) : Instance("verifier", std::move(c)) {
  require(&specd_verifier_vtable::verify, "has no verify function");
  caps_.struct_size = sizeof(caps_);
  caps_.needs_draft_probs = 1;
  caps_.lossless = 1;
  read_capabilities(caps_);
}

void VerifierInstance::verify(const specd_verify_batch& batch) {
  call(&specd_verifier_vtable::verify, "verify", &batch);
}

ScorerInstance::ScorerInstance(CreatedComponent c) : Instance("scorer", std::move(c)) {
  require(&specd_scorer_vtable::score, "has no score function");
  caps_.struct_size = sizeof(caps_);
  read_capabilities(caps_);
}

void ScorerInstance::score(specd_score_batch& batch) {
  call(&specd_scorer_vtable::score, "score", &batch);
}

}  // namespace specd::plugin
