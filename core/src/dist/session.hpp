// Session: this process's part in an MPI job (one process = one rank), and the control channel
// rank 0 drives the other ranks with (docs/distributed.md).
//
//   int main(int argc, char** argv) {
//     specd::dist::Session session(&argc, &argv);      // MPI only when launched by mpirun
//     if (!session.leader()) return specd::tp::follow(session);  // ranks 1..N-1 run what rank 0 sends
//     ... rank 0: the CLI command, the server, a test ...
//   }                                                  // rank 0's session end stops the others
//
// Without an MPI launcher (no OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK in the environment)
// the session is a job of one rank and MPI is never initialized: a plain `specd` run pays
// nothing for it. MPI is initialized with MPI_THREAD_SERIALIZED: the engine may run on a thread
// other than main's (the server's engine thread), one MPI call at a time.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dist/communicator.hpp"

namespace specd::dist {

// True when the environment says an MPI launcher started this process.
bool launched_by_mpi();

// Rank 0 -> every other rank: command messages (a model load, a forward), plus the status
// every rank reports after a command that can fail (a load). It runs on a communicator of its
// own, so a command never interleaves with a model's collectives.
class ControlChannel {
 public:
  virtual ~ControlChannel() = default;
  // Rank 0: sends `message` (non-empty) to every other rank.
  virtual void send(std::span<const std::byte> message) = 0;
  // Rank 0: tells every other rank that the session ended (receive returns false).
  virtual void send_end() = 0;
  // Ranks 1..N-1: waits for rank 0's next message. An idle rank polls with short sleeps
  // rather than spinning in MPI, so a follower of an idle server uses no CPU to speak of.
  // Returns false when the session ended.
  virtual bool receive(std::vector<std::byte>& message) = 0;
  // Every rank: its status ("" = ok, else an error message, truncated to 1000 bytes) in, every
  // rank's status out, indexed by rank.
  virtual std::vector<std::string> exchange_status(const std::string& status) = 0;
};

class Session {
 public:
  // At most one Session per process. Throws specd::Error when MPI cannot give the thread
  // support the engine needs.
  Session(int* argc, char*** argv);
  // Rank 0: ends the other ranks' tp::follow(). Every rank: MPI_Finalize.
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // The process's session, or null when none was created (library use, unit tests).
  static Session* current();

  int rank() const;
  int size() const;
  int local_size() const;  // ranks on this machine (divides the CPU threads between them)
  bool leader() const { return rank() == 0; }

  // Every rank: the target model's tensor-parallel group.
  Communicator& world();
  // A communicator over ranks [0, n) (a draft's group when the draft runs on fewer ranks than
  // the target). Collective: every rank calls it; ranks >= n get null.
  std::unique_ptr<Communicator> first_ranks(int n);
  ControlChannel& control();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace specd::dist
