#include "tp/tensor_parallel.hpp"

#include <algorithm>
#include <csignal>
#include <cstring>
#include <thread>
#include <type_traits>

#include "model/checkpoint.hpp"
#include "specd/error.hpp"
#include "specd/kernels/parallel.hpp"
#include "specd/log.hpp"

namespace specd::tp {

using dist::Communicator;
using dist::Session;

// ---- messages -------------------------------------------------------------------------------

// Every field starts on an 8-byte boundary, so spans of a message's ints and floats are read in
// place (the buffer comes from operator new, 16-byte aligned).
constexpr int32_t kMixFlag = 0x100;  // a WeightDTypes mix on the wire

constexpr size_t padded(size_t n) {
  return (n + 7) & ~size_t{7};
}

class MessageWriter {
 public:
  explicit MessageWriter(std::vector<std::byte>& buf) : buf_(buf) { buf_.clear(); }
  template <class T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    put_bytes(&v, sizeof v);
  }
  template <class T>
  void put_span(std::span<const T> v) {
    put<int64_t>(static_cast<int64_t>(v.size()));
    put_bytes(v.data(), v.size_bytes());
  }
  void put_string(const std::string& s) { put_span(std::span<const char>(s)); }
  // -1: auto; else the base dtype, plus kMixFlag for a q*_k_m mix.
  void put_dtype(const model::WeightDTypes& d) {
    put<int32_t>(d.base ? static_cast<int32_t>(*d.base) | (d.mix ? kMixFlag : 0) : -1);
  }

 private:
  void put_bytes(const void* p, size_t n) {
    const size_t at = buf_.size();
    buf_.resize(at + padded(n));  // keeps its capacity across messages: no allocation per step
    if (n > 0) std::memcpy(buf_.data() + at, p, n);
  }
  std::vector<std::byte>& buf_;
};

class MessageReader {
 public:
  explicit MessageReader(std::span<const std::byte> m) : m_(m) {}
  template <class T>
  T get() {
    T v;
    std::memcpy(&v, take(sizeof v), sizeof v);
    return v;
  }
  template <class T>
  std::span<const T> get_span() {
    const auto n = static_cast<size_t>(get<int64_t>());
    return {reinterpret_cast<const T*>(take(n * sizeof(T))), n};
  }
  std::string get_string() {
    const auto s = get_span<char>();
    return {s.begin(), s.end()};
  }
  model::WeightDTypes get_dtype() {
    const auto d = get<int32_t>();
    if (d < 0) return std::nullopt;
    model::WeightDTypes w(static_cast<model::DType>(d & ~kMixFlag));
    w.mix = (d & kMixFlag) != 0;
    return w;
  }

 private:
  const std::byte* take(size_t n) {
    SPECD_CHECK(pos_ + n <= m_.size(), ErrorCode::kInternal, "tensor parallelism: truncated control message");
    const std::byte* p = m_.data() + pos_;
    pos_ += padded(n);
    return p;
  }
  std::span<const std::byte> m_;
  size_t pos_ = 0;
};

namespace {

enum class Op : int32_t { kOpen = 1, kLoad, kKv, kForward, kRelease, kClose };

constexpr int32_t kReturnHidden = 1, kHiddenAll = 2, kInputHidden = 4;

void put_target(MessageWriter& w, const TargetSpec& t) {
  w.put_string(t.path);
  w.put_dtype(t.dtype);
  w.put<int32_t>(static_cast<int32_t>(t.placement));
  w.put<int32_t>(t.num_threads);
  w.put<int32_t>(t.proposer_size);
  w.put<int64_t>(t.context_length);
}

TargetSpec get_target(MessageReader& in) {
  TargetSpec t;
  t.path = in.get_string();
  t.dtype = in.get_dtype();
  t.placement = static_cast<model::WeightPlacement>(in.get<int32_t>());
  t.num_threads = in.get<int32_t>();
  t.proposer_size = in.get<int32_t>();
  t.context_length = in.get<int64_t>();
  return t;
}

void put_hosted(MessageWriter& w, const HostedModelSpec& s) {
  w.put_string(s.path);
  w.put<int64_t>(s.layers);
  w.put_dtype(s.dtype);
  w.put<int32_t>(s.mtp_module);
  w.put<int32_t>(s.base);
}

HostedModelSpec get_hosted(MessageReader& in) {
  HostedModelSpec s;
  s.path = in.get_string();
  s.layers = in.get<int64_t>();
  s.dtype = in.get_dtype();
  s.mtp_module = in.get<int32_t>();
  s.base = in.get<int32_t>();
  return s;
}

// A rank's status in exchange_status: "" = ok, else "<error code>:<message>".
std::string status_of(const std::function<void()>& fn, ErrorCode* code = nullptr) {
  try {
    fn();
    return "";
  } catch (const Error& e) {
    if (code != nullptr) *code = e.code();
    return std::to_string(static_cast<int>(e.code())) + ":" + e.what();
  } catch (const std::exception& e) {
    if (code != nullptr) *code = ErrorCode::kInternal;
    return std::to_string(static_cast<int>(ErrorCode::kInternal)) + ":" + e.what();
  }
}

}  // namespace

int32_t kernel_threads(int32_t configured) {
  if (configured > 0) return configured;
  const Session* s = Session::current();
  const int ranks_here = s != nullptr ? std::max(1, s->local_size()) : 1;
  return static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency() / static_cast<unsigned>(ranks_here)));
}

std::shared_ptr<const model::LlamaWeights> load_hosted_weights(const HostedModelSpec& spec,
                                                               const std::shared_ptr<const model::LlamaWeights>& target,
                                                               const std::shared_ptr<const model::LlamaWeights>& base,
                                                               model::TensorShard shard) {
  if (spec.mtp_module >= 0) return model::LlamaWeights::load_mtp(base, spec.mtp_module);
  if (spec.path.empty()) {
    if (spec.dtype == target->requested_dtype() && shard == target->shard()) return target;
    return model::LlamaWeights::load(target->checkpoint_ptr(), spec.layers, spec.dtype, target->placement(), shard);
  }
  std::shared_ptr<const model::Checkpoint> ckpt = model::Checkpoint::open(spec.path);
  if (ckpt->config().eagle3) {
    // The head fuses the target's layer states, which only rank 0 receives.
    if (shard.size > 1)
      throw Error(ErrorCode::kUnsupported, spec.path + ": an EAGLE-3 head runs on rank 0 alone, not split over " +
                                               std::to_string(shard.size) +
                                               " ranks: set speculative.proposer.tensor_parallel_size: 1");
    return model::LlamaWeights::load_eagle3(ckpt, target, spec.dtype);
  }
  return model::LlamaWeights::load(ckpt, spec.layers, spec.dtype, target->placement(), shard);
}

// ---- Leader ---------------------------------------------------------------------------------

Leader::Leader(Session& session, const TargetSpec& spec, const std::function<void()>& load_target)
    : session_(session), group_(session.world()), spec_(spec) {
  MessageWriter w(message_);
  w.put(Op::kOpen);
  put_target(w, spec_);
  session_.control().send(message_);
  if (spec_.proposer_size < group_.size()) draft_group_ = session_.first_ranks(spec_.proposer_size);
  run_everywhere(load_target, "load the target " + spec_.path);
}

Leader::~Leader() {
  MessageWriter w(message_);
  w.put(Op::kClose);
  session_.control().send(message_);
}

void Leader::run_everywhere(const std::function<void()>& here, const std::string& what) {
  ErrorCode code = ErrorCode::kInternal;
  const std::string mine = status_of(here, &code);
  const std::vector<std::string> all = session_.control().exchange_status(mine);
  std::string failed;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].empty()) continue;
    const size_t colon = all[r].find(':');
    if (failed.empty()) code = static_cast<ErrorCode>(std::stoi(all[r].substr(0, colon)));
    failed += (failed.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + ": " + all[r].substr(colon + 1);
  }
  if (!failed.empty()) throw Error(code, "tensor parallelism: could not " + what + " on every rank (" + failed + ")");
}

int32_t Leader::load(const HostedModelSpec& spec, bool all_ranks, const std::function<void()>& load_here) {
  if (!all_ranks) {  // rank 0 alone, in the draft's group: never announced
    load_here();
    return kLocal;
  }
  const int32_t id = next_id_++;
  MessageWriter w(message_);
  w.put(Op::kLoad);
  w.put(id);
  put_hosted(w, spec);
  session_.control().send(message_);
  run_everywhere(load_here, spec.mtp_module >= 0 ? "load MTP module " + std::to_string(spec.mtp_module)
                                                 : "load " + (spec.path.empty() ? spec_.path : spec.path));
  return id;
}

void Leader::release(int32_t model) {
  if (model == kLocal) return;
  MessageWriter w(message_);
  w.put(Op::kRelease);
  w.put(model);
  session_.control().send(message_);
}

void Leader::allocate_kv(int32_t model, const kv::KvCacheShape& shape, int32_t num_blocks,
                         const std::function<kv::KvCache&()>& allocate_here) {
  if (model == kLocal) {
    allocate_here();
    return;
  }
  MessageWriter w(message_);
  w.put(Op::kKv);
  w.put(model);
  w.put(shape);
  w.put(num_blocks);
  session_.control().send(message_);
  // The followers mirror rank 0's block tables, so they must also repeat its copy-on-write copies.
  run_everywhere([&] { allocate_here().record_copies(true); }, "allocate " + std::to_string(num_blocks) + " KV blocks");
}

void Leader::attach(model::LlamaModel& llama, int32_t id) {
  if (id == kLocal) return;
  const int64_t hidden = llama.config().hidden_size;
  llama.set_announce(
      [this, id, hidden](const model::ForwardBatch& b, kv::KvCache& kv) { announce_forward(id, hidden, b, kv); });
}

void Leader::announce_forward(int32_t id, int64_t hidden, const model::ForwardBatch& batch, kv::KvCache& kv) {
  MessageWriter w(message_);
  w.put(Op::kForward);
  w.put(id);
  int64_t tokens = 0;
  for (const model::SequenceInput& s : batch.seqs) tokens += static_cast<int64_t>(s.tokens.size());
  const int32_t flags = (batch.return_hidden ? kReturnHidden : 0) | (batch.hidden_all ? kHiddenAll : 0) |
                        (batch.input_hidden != nullptr ? kInputHidden : 0);
  w.put<int32_t>(static_cast<int32_t>(batch.seqs.size()));
  w.put(flags);
  const std::vector<int32_t> copies = kv.take_copies();  // copy-on-write and compaction since the last forward
  w.put_span(std::span<const int32_t>(copies));
  for (const model::SequenceInput& s : batch.seqs) {
    w.put<int64_t>(s.seq);
    w.put<int32_t>(kv.num_tokens(s.seq));
    w.put<int32_t>(static_cast<int32_t>(s.logits));
    w.put_span(kv.block_table(s.seq));
    w.put_span(s.tokens);
    w.put_span(s.tree);
  }
  if (batch.input_hidden != nullptr)  // MTP: [tokens, hidden], rows paired with the new tokens
    w.put_span(std::span<const float>(batch.input_hidden, static_cast<size_t>(tokens * hidden)));
  session_.control().send(message_);
}

// ---- Follower -------------------------------------------------------------------------------

struct Follower::Model {
  std::shared_ptr<const model::LlamaWeights> weights;
  std::unique_ptr<model::LlamaModel> llama;
  std::unique_ptr<kv::KvCache> kv;
  model::ForwardOutput out;
};

Follower::Follower(Session& session) : session_(session) {}
Follower::~Follower() = default;

int Follower::run() {
  log::get("dist").info("rank {} of {} follows rank 0", session_.rank(), session_.size());
  std::vector<std::byte> message;
  while (session_.control().receive(message)) handle(message);
  models_.clear();
  return 0;
}

void Follower::handle(const std::vector<std::byte>& message) {
  MessageReader in(message);
  switch (in.get<Op>()) {
    case Op::kOpen:
      open(in);
      return;
    case Op::kLoad:
      load(in);
      return;
    case Op::kKv:
      allocate_kv(in);
      return;
    case Op::kForward:
      forward(in);
      return;
    case Op::kRelease: {
      const auto id = static_cast<size_t>(in.get<int32_t>());
      if (id < models_.size()) models_[id].reset();
      return;
    }
    case Op::kClose:
      models_.clear();
      draft_group_.reset();
      return;
  }
  session_.world().abort("unknown control message from rank 0");
}

bool Follower::run_everywhere(const std::function<void()>& fn) {
  const std::string mine = status_of(fn);
  if (!mine.empty()) log::get("dist").error("rank {}: {}", session_.rank(), mine.substr(mine.find(':') + 1));
  const std::vector<std::string> all = session_.control().exchange_status(mine);
  return std::all_of(all.begin(), all.end(), [](const std::string& s) { return s.empty(); });
}

void Follower::open(MessageReader& in) {
  spec_ = get_target(in);
  models_.clear();
  kernels::set_num_threads(kernel_threads(spec_.num_threads));
  if (spec_.proposer_size < session_.size()) draft_group_ = session_.first_ranks(spec_.proposer_size);
  const bool ok = run_everywhere([&] {
    auto m = std::make_unique<Model>();
    m->weights = model::LlamaWeights::load(model::Checkpoint::open(spec_.path), -1, spec_.dtype, spec_.placement,
                                           {session_.rank(), session_.size()});
    m->llama = std::make_unique<model::LlamaModel>(m->weights, -1, &session_.world());
    m->llama->set_context_length(spec_.context_length);
    models_.push_back(std::move(m));
  });
  if (!ok) models_.clear();
}

void Follower::load(MessageReader& in) {
  const auto id = static_cast<size_t>(in.get<int32_t>());
  const HostedModelSpec spec = get_hosted(in);
  if (models_.size() <= id) models_.resize(id + 1);
  const bool ok = run_everywhere([&] {
    SPECD_CHECK(!models_.empty() && models_[0] != nullptr, ErrorCode::kInternal, "load before the target");
    const auto base = static_cast<size_t>(spec.base);
    SPECD_CHECK(spec.mtp_module < 0 || (base < models_.size() && models_[base] != nullptr), ErrorCode::kInternal,
                "MTP module of an unknown model");
    auto m = std::make_unique<Model>();
    m->weights = load_hosted_weights(spec, models_[0]->weights, spec.mtp_module >= 0 ? models_[base]->weights : nullptr,
                                     {session_.rank(), session_.size()});
    m->llama =
        std::make_unique<model::LlamaModel>(m->weights, spec.mtp_module >= 0 ? -1 : spec.layers, &session_.world());
    m->llama->set_context_length(spec_.context_length);
    models_[id] = std::move(m);
  });
  if (!ok) models_[id].reset();
}

void Follower::allocate_kv(MessageReader& in) {
  const auto id = static_cast<size_t>(in.get<int32_t>());
  const auto shape = in.get<kv::KvCacheShape>();
  const auto num_blocks = in.get<int32_t>();
  run_everywhere([&] {
    SPECD_CHECK(id < models_.size() && models_[id] != nullptr, ErrorCode::kInternal, "KV cache of an unknown model");
    models_[id]->kv = std::make_unique<kv::KvCache>(shape, num_blocks);
  });
}

void Follower::forward(MessageReader& in) {
  const auto id = static_cast<size_t>(in.get<int32_t>());
  const auto num_seqs = static_cast<size_t>(in.get<int32_t>());
  const auto flags = in.get<int32_t>();
  const auto copies = in.get_span<int32_t>();
  try {
    SPECD_CHECK(id < models_.size() && models_[id] != nullptr && models_[id]->kv != nullptr, ErrorCode::kInternal,
                "forward of an unknown model " + std::to_string(id));
    Model& m = *models_[id];
    batch_.seqs.resize(num_seqs);
    mirror_.resize(num_seqs);
    for (size_t i = 0; i < num_seqs; ++i) {
      model::SequenceInput& s = batch_.seqs[i];
      s.seq = in.get<int64_t>();
      mirror_[i].seq = s.seq;
      mirror_[i].num_tokens = in.get<int32_t>();
      s.logits = static_cast<model::LogitsMode>(in.get<int32_t>());
      mirror_[i].blocks = in.get_span<int32_t>();
      s.tokens = in.get_span<int32_t>();
      s.tree = in.get_span<int32_t>();
    }
    batch_.return_hidden = (flags & kReturnHidden) != 0;
    batch_.hidden_all = (flags & kHiddenAll) != 0;
    batch_.input_hidden = (flags & kInputHidden) != 0 ? in.get_span<float>().data() : nullptr;
    m.kv->repeat_copies(copies);
    m.kv->mirror(mirror_);
    m.llama->forward(batch_, *m.kv, m.out);
  } catch (const std::exception& e) {
    session_.world().abort(std::string("forward of model ") + std::to_string(id) + " failed: " + e.what());
  }
}

// ---- the factory ----------------------------------------------------------------------------

namespace {

// A single process: everything is built and runs here.
class LocalModels final : public ModelFactory {
 public:
  int32_t size() const override { return 1; }
  int32_t proposer_size() const override { return 1; }
  dist::Communicator* group(bool) override { return nullptr; }
  int32_t load(const HostedModelSpec&, bool, const std::function<void()>& build) override {
    build();
    return kLocal;
  }
  void attach(model::LlamaModel&, int32_t) override {}
  void allocate_kv(int32_t, const kv::KvCacheShape&, int32_t, const std::function<kv::KvCache&()>& here) override {
    here();
  }
  void release(int32_t) override {}
};

}  // namespace

std::unique_ptr<ModelFactory> open_models(Session* session, int32_t tensor_parallel_size, const TargetSpec& target,
                                          const std::function<void()>& load_target) {
  if (tensor_parallel_size == 1) {
    load_target();
    return std::make_unique<LocalModels>();
  }
  SPECD_CHECK(session != nullptr, ErrorCode::kInternal, "tensor parallelism without an MPI session");
  return std::make_unique<Leader>(*session, target, load_target);
}

int follow(Session& session) {
  SPECD_CHECK(!session.leader(), ErrorCode::kInternal, "tp::follow on rank 0");
  // mpirun forwards SIGINT/SIGTERM to every rank: rank 0 decides how to stop (the server
  // drains its requests) and ends the session, which ends this loop.
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGTERM, SIG_IGN);
  return Follower(session).run();
}

}  // namespace specd::tp
