// The MPI side of dist/: Session (MPI initialization only under a launcher), the Communicator
// over an MPI communicator, and the control channel. mpi.h stays inside this file.
// The C API only: OpenMPI and MPICH otherwise pull in their deprecated C++ bindings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "dist/session.hpp"
#include "specd/error.hpp"
#include "specd/log.hpp"

namespace specd::dist {
namespace {

Session* g_session = nullptr;

int checked_count(int64_t count, const char* what) {
  SPECD_CHECK(count >= 0 && count <= INT_MAX, ErrorCode::kInternal,
              std::string(what) + ": " + std::to_string(count) + " elements exceed one MPI call");
  return static_cast<int>(count);
}

// Below this many floats gathered (count * ranks), all_reduce_sum is one all-gather and a local
// sum (one latency); above it, an all-to-all of slices, the sum of one's own slice and an
// all-gather of the sums (each rank moves 2 (n-1)/n of the data instead of n-1 times it). The
// sum is the same rank-ordered one on either path, so the switch never changes a result.
constexpr int64_t kGatherAllLimit = int64_t{1} << 16;

// acc [count] = Σ_r parts[r * stride .. + count), added in rank order.
void sum_in_rank_order(const float* parts, int64_t stride, int n, int64_t count, float* acc) {
  std::memcpy(acc, parts, static_cast<size_t>(count) * sizeof(float));
  for (int r = 1; r < n; ++r) {
    const float* p = parts + r * stride;
    for (int64_t i = 0; i < count; ++i) acc[i] += p[i];
  }
}

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of `comm` unless it is MPI_COMM_WORLD.
  explicit MpiCommunicator(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && comm_ != MPI_COMM_WORLD) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_reduce_sum(float* data, int64_t count) override {
    if (size_ == 1 || count == 0) return;
    const int64_t n = size_;
    if (count * n <= kGatherAllLimit) {
      parts_.resize(static_cast<size_t>(count * n));
      const int c = checked_count(count, "all_reduce_sum");
      MPI_Allgather(data, c, MPI_FLOAT, parts_.data(), c, MPI_FLOAT, comm_);
      sum_in_rank_order(parts_.data(), count, size_, count, data);
      return;
    }
    // Rank r owns elements [r * slice, min(count, (r + 1) * slice)).
    const int64_t slice = (count + n - 1) / n;
    counts_.resize(static_cast<size_t>(n));
    displs_.resize(static_cast<size_t>(n));
    for (int64_t r = 0; r < n; ++r) {
      const int64_t begin = std::min(count, r * slice);
      counts_[static_cast<size_t>(r)] = checked_count(std::min(count, begin + slice) - begin, "all_reduce_sum");
      displs_[static_cast<size_t>(r)] = checked_count(begin, "all_reduce_sum");
    }
    const int mine = counts_[static_cast<size_t>(rank_)];
    parts_.resize(static_cast<size_t>(slice * n));
    recv_counts_.assign(static_cast<size_t>(n), mine);
    recv_displs_.resize(static_cast<size_t>(n));
    for (int64_t r = 0; r < n; ++r) recv_displs_[static_cast<size_t>(r)] = static_cast<int>(r * slice);
    MPI_Alltoallv(data, counts_.data(), displs_.data(), MPI_FLOAT, parts_.data(), recv_counts_.data(),
                  recv_displs_.data(), MPI_FLOAT, comm_);
    sum_in_rank_order(parts_.data(), slice, size_, mine, data + displs_[static_cast<size_t>(rank_)]);
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, data, counts_.data(), displs_.data(), MPI_FLOAT, comm_);
  }

  void all_gather(const float* send, float* recv, int64_t count) override {
    const int c = checked_count(count, "all_gather");
    MPI_Allgather(send, c, MPI_FLOAT, recv, c, MPI_FLOAT, comm_);
  }

  void broadcast(void* data, size_t bytes, int root) override {
    auto* p = static_cast<char*>(data);
    for (size_t done = 0; done < bytes;) {
      const int n = static_cast<int>(std::min<size_t>(bytes - done, INT_MAX));
      MPI_Bcast(p + done, n, MPI_BYTE, root, comm_);
      done += static_cast<size_t>(n);
    }
  }

  void barrier() override { MPI_Barrier(comm_); }

  [[noreturn]] void abort(const std::string& why) override {
    int world_rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    log::get("dist").log(log::Level::kCritical, "rank {}: {}; ending the job", world_rank, why);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::abort();  // MPI_Abort does not return; this keeps [[noreturn]] honest
  }

 private:
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  std::vector<float> parts_;
  std::vector<int> counts_, displs_, recv_counts_, recv_displs_;
};

// Messages are sent as one fixed-size inline broadcast (length + the first bytes; a decode
// step's forward fits) and, when longer, a second broadcast of the rest. The inline part is a
// non-blocking broadcast on both sides (MPI never matches a blocking collective with a
// non-blocking one), which lets followers poll it.
class MpiControlChannel final : public ControlChannel {
 public:
  static constexpr size_t kInline = 4096;
  static constexpr uint64_t kEnd = ~uint64_t{0};
  static constexpr size_t kStatusBytes = 1024;

  explicit MpiControlChannel(MPI_Comm comm) : comm_(comm) { MPI_Comm_size(comm_, &size_); }
  ~MpiControlChannel() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

  void send(std::span<const std::byte> message) override {
    SPECD_CHECK(!message.empty(), ErrorCode::kInternal, "control channel: empty message");
    send_raw(message.size(), message);
  }

  void send_end() override { send_raw(kEnd, {}); }

  bool receive(std::vector<std::byte>& message) override {
    MPI_Request request;
    MPI_Ibcast(inline_, static_cast<int>(kInline), MPI_BYTE, 0, comm_, &request);
    wait_idle(request);
    uint64_t total = 0;
    std::memcpy(&total, inline_, sizeof(total));
    if (total == kEnd) return false;
    message.resize(static_cast<size_t>(total));
    const size_t head = std::min<size_t>(total, kInline - sizeof(total));
    std::memcpy(message.data(), inline_ + sizeof(total), head);
    broadcast_rest(message.data() + head, total - head);
    return true;
  }

  std::vector<std::string> exchange_status(const std::string& status) override {
    char mine[kStatusBytes] = {};
    // NOLINTNEXTLINE(bugprone-not-null-terminated-result): mine is zeroed, its last byte stays 0
    std::memcpy(mine, status.data(), std::min(status.size(), kStatusBytes - 1));
    std::vector<char> all(kStatusBytes * static_cast<size_t>(size_));
    MPI_Allgather(mine, static_cast<int>(kStatusBytes), MPI_BYTE, all.data(), static_cast<int>(kStatusBytes), MPI_BYTE,
                  comm_);
    std::vector<std::string> out;
    for (int r = 0; r < size_; ++r) out.emplace_back(all.data() + static_cast<size_t>(r) * kStatusBytes);
    return out;
  }

 private:
  void send_raw(uint64_t total, std::span<const std::byte> message) {
    std::memcpy(inline_, &total, sizeof(total));
    const size_t head = std::min(message.size(), kInline - sizeof(total));
    if (head > 0) std::memcpy(inline_ + sizeof(total), message.data(), head);
    MPI_Request request;
    MPI_Ibcast(inline_, static_cast<int>(kInline), MPI_BYTE, 0, comm_, &request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    if (message.size() > head) broadcast_rest(const_cast<std::byte*>(message.data()) + head, message.size() - head);
  }

  void broadcast_rest(std::byte* data, size_t bytes) {
    for (size_t done = 0; done < bytes;) {
      const int n = static_cast<int>(std::min<size_t>(bytes - done, INT_MAX));
      MPI_Bcast(data + done, n, MPI_BYTE, 0, comm_);
      done += static_cast<size_t>(n);
    }
  }

  // Spins for a millisecond (back-to-back steps arrive well within it), then sleeps between
  // polls, 20 us growing to 1 ms: an idle follower wakes about a thousand times a second.
  static void wait_idle(MPI_Request& request) {
    using Clock = std::chrono::steady_clock;
    const auto spin_until = Clock::now() + std::chrono::milliseconds(1);
    auto pause = std::chrono::microseconds(20);
    for (;;) {
      int done = 0;
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (done) return;
      if (Clock::now() < spin_until) continue;
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  }

  MPI_Comm comm_;
  int size_ = 1;
  alignas(8) std::byte inline_[kInline] = {};
};

}  // namespace

bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') return true;
  }
  return false;
}

struct Session::Impl {
  bool mpi = false;
  int rank = 0;
  int size = 1;
  int local_size = 1;
  std::unique_ptr<MpiCommunicator> world;
  std::unique_ptr<MpiControlChannel> control;
};

Session::Session(int* argc, char*** argv) : impl_(std::make_unique<Impl>()) {
  SPECD_CHECK(g_session == nullptr, ErrorCode::kInternal, "dist::Session: one per process");
  if (launched_by_mpi()) {
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
    impl_->mpi = true;
    if (provided < MPI_THREAD_SERIALIZED) {
      MPI_Finalize();
      throw Error(ErrorCode::kUnsupported,
                  "the MPI library gives thread support level " + std::to_string(provided) +
                      "; specd needs MPI_THREAD_SERIALIZED (the engine runs on its own thread)");
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &impl_->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &impl_->size);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, impl_->rank, MPI_INFO_NULL, &local);
    MPI_Comm_size(local, &impl_->local_size);
    MPI_Comm_free(&local);
    MPI_Comm group, control;
    MPI_Comm_dup(MPI_COMM_WORLD, &group);
    MPI_Comm_dup(MPI_COMM_WORLD, &control);
    impl_->world = std::make_unique<MpiCommunicator>(group);
    impl_->control = std::make_unique<MpiControlChannel>(control);
    if (impl_->size > 1) log::set_tag("rank " + std::to_string(impl_->rank));
  }
  g_session = this;
}

Session::~Session() {
  g_session = nullptr;
  if (!impl_->mpi) return;
  if (leader() && impl_->size > 1) impl_->control->send_end();
  impl_->control.reset();
  impl_->world.reset();
  MPI_Finalize();
}

Session* Session::current() {
  return g_session;
}
int Session::rank() const {
  return impl_->rank;
}
int Session::size() const {
  return impl_->size;
}
int Session::local_size() const {
  return impl_->local_size;
}

Communicator& Session::world() {
  SPECD_CHECK(impl_->world != nullptr, ErrorCode::kInternal, "dist::Session: no MPI job");
  return *impl_->world;
}

ControlChannel& Session::control() {
  SPECD_CHECK(impl_->control != nullptr, ErrorCode::kInternal, "dist::Session: no MPI job");
  return *impl_->control;
}

std::unique_ptr<Communicator> Session::first_ranks(int n) {
  SPECD_CHECK(impl_->mpi && n >= 1 && n <= impl_->size, ErrorCode::kInternal,
              "dist::Session::first_ranks: " + std::to_string(n) + " of " + std::to_string(impl_->size));
  MPI_Comm comm;
  MPI_Comm_split(MPI_COMM_WORLD, impl_->rank < n ? 0 : MPI_UNDEFINED, impl_->rank, &comm);
  if (comm == MPI_COMM_NULL) return nullptr;
  return std::make_unique<MpiCommunicator>(comm);
}

}  // namespace specd::dist
