// The work budget of a render (RenderLimits: max_work, timeout, cancel), charged by whatever
// builds data while a template runs: every string or list a value holds is counted when it is
// made or copied (bytes, elements), sorts count their comparisons, and the operations that can
// make a large result from a small input (repetition, center/ljust/rjust, indent, replace, join)
// charge the result's size before they allocate it. Past the budget, past the deadline or once
// cancelled, the render fails with a TemplateError. The budget belongs to the thread running the
// render (BudgetScope); outside a render, charging is free.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace specd::jinja {

struct RenderLimits;

// Counts `units` (bytes or elements built, comparisons made) against the running render's
// budget; throws TemplateError past it (before the caller allocates, when called first), and
// checks the deadline and cancellation every so often.
void charge_work(uint64_t units);
// A list element's share of the budget: what one costs in memory (a Value and its slot), so that
// the budget bounds the bytes a render holds (a list of 30M repeated items charged 1 unit each
// reached 1.6 GB of RSS within a 64 Mi budget).
inline constexpr uint64_t kListElementUnits = 48;
// The deadline and cancellation, now (loop iterations and calls check them).
void check_render_deadline();

// Installs a render's budget on this thread for its lifetime (renders do not nest).
class BudgetScope {
 public:
  explicit BudgetScope(const RenderLimits& limits);
  ~BudgetScope();
  BudgetScope(const BudgetScope&) = delete;
  BudgetScope& operator=(const BudgetScope&) = delete;
};

}  // namespace specd::jinja
