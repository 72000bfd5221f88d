#include "output/choices.hpp"

namespace specd::output {

void Choices::add(RequestId request, sched::SeqId first, std::vector<std::unique_ptr<sched::Sequence>> waiting) {
  Request& r = requests_[request];
  r.open = 1 + static_cast<int32_t>(waiting.size());
  r.started = {first};
  r.waiting = std::move(waiting);
}

std::vector<std::unique_ptr<sched::Sequence>> Choices::take_waiting(RequestId request) {
  auto it = requests_.find(request);
  if (it == requests_.end()) return {};
  std::vector<std::unique_ptr<sched::Sequence>> out = std::move(it->second.waiting);
  it->second.waiting.clear();
  for (const auto& seq : out) it->second.started.push_back(seq->id);
  return out;
}

std::vector<std::unique_ptr<sched::Sequence>> Choices::drop_waiting(RequestId request) {
  auto it = requests_.find(request);
  if (it == requests_.end()) return {};
  std::vector<std::unique_ptr<sched::Sequence>> out = std::move(it->second.waiting);
  it->second.waiting.clear();
  return out;
}

bool Choices::has_waiting(RequestId request) const {
  auto it = requests_.find(request);
  return it != requests_.end() && !it->second.waiting.empty();
}

std::span<const sched::SeqId> Choices::started(RequestId request) const {
  auto it = requests_.find(request);
  if (it == requests_.end()) return {};
  return it->second.started;
}

void Choices::on_output(RequestOutput& out) {
  if (out.finish_reason == FinishReason::kNone) return;
  auto it = requests_.find(out.id);
  if (it == requests_.end()) return;  // refused before it was added
  out.finished = --it->second.open == 0;
  if (out.finished) requests_.erase(it);
}

}  // namespace specd::output
