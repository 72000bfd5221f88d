// Choices: the requests an engine serves and the sequences that serve them.
//
// A request (the caller's RequestId) runs as n choices (Request::n), each one sequence with an id
// of the engine's own (sched::SeqId, from new_sequence_id(): unique for the engine's life, so a
// proposer's per-sequence state never meets a reused id). Choice 0 starts at once. Choices
// 1..n-1 wait here until choice 0 has prefilled the prompt; the engine then starts them from
// choice 0's KV blocks (Scheduler::add_fork), so the prompt is computed once.
//
// A request is finished when its last choice has ended; its final output then says so
// (RequestOutput::finished) and the request's id may be used again. Engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "sched/scheduler.hpp"
#include "specd/request.hpp"

namespace specd::output {

class Choices {
 public:
  sched::SeqId new_sequence_id() { return next_seq_++; }

  // `request` starts with choice 0 as sequence `first`; `waiting` holds choices 1.. (may be empty).
  void add(RequestId request, sched::SeqId first, std::vector<std::unique_ptr<sched::Sequence>> waiting);
  bool contains(RequestId request) const { return requests_.contains(request); }
  // Requests added and not finished.
  size_t size() const { return requests_.size(); }

  // Choice 0 of `request` has its prompt in the KV cache: the choices waiting for it, moved out
  // (each then counts as started).
  std::vector<std::unique_ptr<sched::Sequence>> take_waiting(RequestId request);
  // Choice 0 ended before its prompt was in: the choices still waiting, moved out (the caller
  // ends them; each still counts as open until its own output is reported).
  std::vector<std::unique_ptr<sched::Sequence>> drop_waiting(RequestId request);
  bool has_waiting(RequestId request) const;
  // The started sequences of `request` (choice 0 and the choices forked from it).
  std::span<const sched::SeqId> started(RequestId request) const;

  // A choice's output is reported: when it is final (finish_reason set), out.finished tells
  // whether it was the request's last open choice, and a finished request is forgotten.
  void on_output(RequestOutput& out);

 private:
  struct Request {
    int32_t open = 0;  // choices not ended yet
    std::vector<sched::SeqId> started;
    std::vector<std::unique_ptr<sched::Sequence>> waiting;
  };
  std::unordered_map<RequestId, Request> requests_;
  sched::SeqId next_seq_ = 0;
};

}  // namespace specd::output
