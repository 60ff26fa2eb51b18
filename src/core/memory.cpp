#include <cpdit/core/memory.hpp>

namespace cpdit {

void MemoryCounter::Counts::add(int64_t bytes) {
  int64_t now = current.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t high = peak.load(std::memory_order_relaxed);
  while (now > high && !peak.compare_exchange_weak(high, now, std::memory_order_relaxed)) {
  }
}

namespace {
MemoryCounter process_counter;
thread_local MemoryCounter* thread_counter = nullptr;
}  // namespace

MemoryCounter& current_memory_counter() { return thread_counter ? *thread_counter : process_counter; }

ScopedMemoryCounter::ScopedMemoryCounter(MemoryCounter& counter) : previous_(thread_counter) {
  thread_counter = &counter;
}
ScopedMemoryCounter::~ScopedMemoryCounter() { thread_counter = previous_; }

namespace memory {
int64_t current_bytes() { return current_memory_counter().current(); }
int64_t peak_bytes() { return current_memory_counter().peak(); }
void reset_peak() { current_memory_counter().reset_peak(); }
}  // namespace memory

}  // namespace cpdit
