// Host-side wrappers of created plugin components. Instance<Vtable> is the one template behind
// ProposerInstance, VerifierInstance and ScorerInstance: it owns the component (destroyed with
// it) and its host context, keeps a copy of the plugin's vtable and one reusable error buffer,
// and turns a failed ABI status into specd::Error(kPluginCall) so that the rest of the core never
// sees the C ABI.
//
// Optional entries: the vtable is copied up to the plugin's struct_size and the rest is zeroed,
// so an entry that an older plugin's shorter vtable lacks reads as absent (NULL), exactly like
// an entry the plugin left NULL. Required entries are checked at creation.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "plugin/host_services.hpp"
#include "specd/sdk/abi.h"

namespace specd::plugin {

// "invalid argument", "unsupported", ... for messages.
std::string status_name(int32_t status);

// What the registry hands to an instance: the created component and where it came from.
struct CreatedComponent {
  std::string name;
  uint32_t abi_minor = 0;  // the ABI minor the plugin was built against
  specd_component component{};
  std::unique_ptr<HostContext> ctx;
};

template <class Vtable>
class Instance {
 public:
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;
  ~Instance() {
    if (vt_.destroy != nullptr) vt_.destroy(self_);
  }

  const std::string& name() const { return name_; }
  uint32_t abi_minor() const { return abi_minor_; }
  const HostContext& context() const { return *ctx_; }

 protected:
  // Copies the vtable (see the file comment); the derived class then require()s its entries.
  Instance(std::string_view kind, CreatedComponent c)
      : self_(c.component.self),
        kind_(kind),
        name_(std::move(c.name)),
        abi_minor_(c.abi_minor),
        ctx_(std::move(c.ctx)) {
    const auto* plugin_vt = static_cast<const Vtable*>(c.component.vtable);
    const size_t n = plugin_vt->struct_size < sizeof(Vtable) ? plugin_vt->struct_size : sizeof(Vtable);
    std::memcpy(&vt_, plugin_vt, n);
    std::memset(reinterpret_cast<char*>(&vt_) + n, 0, sizeof(Vtable) - n);
  }

  // Destroys the component and throws when a required entry is absent.
  template <class Fn>
  void require(Fn Vtable::*entry, const char* what) {
    if (vt_.*entry == nullptr) refuse(what);
  }
  // Fills caps (pre-set with the host's defaults) from the optional capabilities entry.
  template <class Caps>
  void read_capabilities(Caps& caps) {
    if (vt_.capabilities != nullptr && vt_.capabilities(self_, &caps) != SPECD_OK)
      refuse("failed to report its capabilities");
  }
  // Destroys the component and throws specd::Error(kPluginLoad) "<kind> '<name>' <what>".
  [[noreturn]] void refuse(const std::string& what);

  // Calls a fallible entry: entry(self, args..., &error). Throws on a non-OK status.
  template <class Fn, class... Args>
  void call(Fn Vtable::*entry, const char* what, Args... args) {
    error_[0] = '\0';
    const int32_t status = (vt_.*entry)(self_, args..., &err_);
    if (status != SPECD_OK) fail_call(what, status);
  }
  [[noreturn]] void fail_call(const char* what, int32_t status) const;
  HostContext& mutable_context() { return *ctx_; }

  Vtable vt_{};
  void* self_;

 private:
  std::string kind_;
  std::string name_;
  uint32_t abi_minor_;
  std::unique_ptr<HostContext> ctx_;
  char error_[4096];  // reused; only the first byte is reset per call
  specd_error err_{sizeof(specd_error), sizeof(error_), error_};
};

class ProposerInstance : public Instance<specd_proposer_vtable> {
 public:
  explicit ProposerInstance(CreatedComponent c);
  const specd_proposer_caps& capabilities() const { return caps_; }
  // Entries a plugin may leave out are no-ops then.
  void on_prefill(const specd_prefill_batch& batch);
  // `grammar` answers the allowed_tokens service during the call (null: no constraints).
  void propose(specd_propose_batch& batch, const GrammarSource* grammar = nullptr);
  void on_accept(uint64_t seq_id, int32_t num_accepted, specd_token_view emitted);
  void on_release(uint64_t seq_id) noexcept;
  void on_finish(const specd_sequence& seq) noexcept;

 private:
  specd_proposer_caps caps_{};
};

class VerifierInstance : public Instance<specd_verifier_vtable> {
 public:
  explicit VerifierInstance(CreatedComponent c);
  const specd_verifier_caps& capabilities() const { return caps_; }
  void verify(const specd_verify_batch& batch);

 private:
  specd_verifier_caps caps_{};
};

class ScorerInstance : public Instance<specd_scorer_vtable> {
 public:
  explicit ScorerInstance(CreatedComponent c);
  // Optional entry (ABI 1.3): absent = chains only.
  const specd_scorer_caps& capabilities() const { return caps_; }
  void score(specd_score_batch& batch);

 private:
  specd_scorer_caps caps_{};
};

}  // namespace specd::plugin
