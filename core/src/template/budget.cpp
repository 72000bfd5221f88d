#include "template/budget.hpp"

#include <mutex>
#include <string>

#include "template/interpreter.hpp"
#include "template/value.hpp"

namespace specd::jinja {

namespace {

struct Budget {
  uint64_t left = 0;
  uint64_t limit = 0;
  std::chrono::steady_clock::time_point deadline;
  bool has_deadline = false;
  int64_t timeout_ms = 0;
  const std::atomic<bool>* cancel = nullptr;
  uint32_t calls = 0;
  bool holds_gate = false;
};

// Renders take turns past kSoloWork: at most one render at a time builds more than that, so
// concurrent requests with hostile templates hold one budget's memory between them, not one
// each (two at once held 2 x 57 MB). Ordinary renders stay far below it and never wait; a render
// that waits for its turn still honours its deadline and cancellation.
constexpr uint64_t kSoloWork = uint64_t{4} << 20;
std::timed_mutex large_renders;

// The running render's budget on this thread (BudgetScope), or null.
thread_local Budget budget_of_thread;
thread_local Budget* current = nullptr;

void check(const Budget& b) {
  if (b.cancel != nullptr && b.cancel->load(std::memory_order_relaxed))
    throw TemplateError("the render was cancelled (the request ended or the server is shutting down)");
  if (b.has_deadline && std::chrono::steady_clock::now() > b.deadline)
    throw TemplateError("the template took longer than " + std::to_string(b.timeout_ms) +
                        " ms to render (server.template_timeout_ms)");
}

}  // namespace

void charge_work(uint64_t units) {
  Budget* b = current;
  if (b == nullptr) return;
  if (units > b->left)
    throw TemplateError("the template built more than " + std::to_string(b->limit >> 20) +
                        " Mi bytes and elements (its work and memory budget)");
  b->left -= units;
  if (!b->holds_gate && b->limit - b->left > kSoloWork) {
    while (!large_renders.try_lock_for(std::chrono::milliseconds(10))) check(*b);
    b->holds_gate = true;
  }
  if ((++b->calls & 255u) == 0) check(*b);
}

void check_render_deadline() {
  if (current != nullptr) check(*current);
}

BudgetScope::BudgetScope(const RenderLimits& limits) {
  Budget& b = budget_of_thread;
  b = Budget{};
  b.left = b.limit = limits.max_work;
  b.timeout_ms = limits.timeout.count();
  b.has_deadline = limits.timeout.count() > 0;
  if (b.has_deadline) b.deadline = std::chrono::steady_clock::now() + limits.timeout;
  b.cancel = limits.cancel;
  current = &b;
}

BudgetScope::~BudgetScope() {
  if (current != nullptr && current->holds_gate) large_renders.unlock();
  current = nullptr;
}

}  // namespace specd::jinja
