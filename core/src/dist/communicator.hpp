// Communicator: the collectives tensor parallelism needs, over one group of ranks (a model's
// tensor-parallel group). Implementations: MPI for CPU ranks (mpi.cpp; processes on one
// machine or many, over shared memory or TCP). A CUDA communicator (NCCL) comes with the CUDA
// model runtime; the contract below is what it must keep.
//
// Contract shared by every implementation:
//   - Every rank of the group makes the same calls in the same order with the same counts.
//   - all_reduce_sum is deterministic and batch invariant: each element becomes
//     ((x_0 + x_1) + x_2) + ... + x_{n-1} in rank order, computed in F32, whatever `count` is
//     and whatever the other elements are, and bit-identical on every rank. A decode step (one
//     row) and a scoring step (k+1 rows) therefore reduce each row exactly alike, which keeps
//     greedy speculative output equal to plain output under tensor parallelism (MPI's and
//     NCCL's own all-reduce pick their algorithm, and so the summation order, by message size).
//   - A failure inside a collective (a lost rank, a broken link) is not reported per call: the
//     launcher ends the whole job (docs/distributed.md "Failures").
// CPU communicators take host pointers; CUDA communicators take device pointers and enqueue on
// the stream set with set_stream (the calls return before the data is ready).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace specd::dist {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // data [count], in place: the element-wise sum over the group, in rank order (see above).
  virtual void all_reduce_sum(float* data, int64_t count) = 0;
  // send [count] from every rank -> recv [size * count], rank r's part at r * count.
  virtual void all_gather(const float* send, float* recv, int64_t count) = 0;
  // `bytes` bytes at data, from rank `root` to every rank.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // CUDA: the stream the collectives are enqueued on (a cudaStream_t); CPU communicators have
  // no stream and ignore it.
  virtual void set_stream(void* stream) { (void)stream; }

  // Ends the whole job (every rank of every group) with `why` in the log: for a failure that
  // leaves the ranks out of step, where any further collective would wait forever.
  [[noreturn]] virtual void abort(const std::string& why) = 0;
};

}  // namespace specd::dist
