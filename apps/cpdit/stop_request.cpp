#include "stop_request.hpp"

#include <cpdit/core/error.hpp>

#include <atomic>

namespace cpdit::app {
namespace {
// Lock-free, so a signal handler may set it.
std::atomic<bool> stop{false};
static_assert(std::atomic<bool>::is_always_lock_free);
}  // namespace

void request_stop() { stop.store(true, std::memory_order_relaxed); }
void clear_stop_request() { stop.store(false, std::memory_order_relaxed); }
bool stop_requested() { return stop.load(std::memory_order_relaxed); }

void throw_if_stop_requested() {
  CPDIT_CHECK(!stop_requested(), interrupted, "generation interrupted");
}

}  // namespace cpdit::app
