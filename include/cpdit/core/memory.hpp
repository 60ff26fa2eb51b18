#pragma once
// Per-rank memory accounting and the caching allocator behind every Tensor.
//
// Accounting: every byte a Tensor owns is charged to the MemoryCounter of the rank that allocated it
// (the thread's current counter; one process-wide counter by default). Ranks run as threads in one
// process, so each rank installs its own counter with ScopedMemoryCounter. Freed storage is credited
// back to the counter it was charged to, whichever thread frees it.
//
// Caching: first writes to fresh pages are very slow on some hosts, so freed blocks are kept in
// size-bucketed free lists and handed out again. Cached blocks are not charged to any rank.
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace cpdit {

class MemoryCounter {
 public:
  void add(int64_t bytes);
  void sub(int64_t bytes);
  int64_t current() const { return current_.load(std::memory_order_relaxed); }
  int64_t peak() const { return peak_.load(std::memory_order_relaxed); }
  void reset_peak() { peak_.store(current(), std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> current_{0};
  std::atomic<int64_t> peak_{0};
};

// The counter charged by allocations on this thread.
MemoryCounter& current_memory_counter();

class ScopedMemoryCounter {
 public:
  explicit ScopedMemoryCounter(MemoryCounter& counter);
  ~ScopedMemoryCounter();
  ScopedMemoryCounter(const ScopedMemoryCounter&) = delete;
  ScopedMemoryCounter& operator=(const ScopedMemoryCounter&) = delete;

 private:
  MemoryCounter* previous_;
};

namespace memory {
int64_t current_bytes();  // bytes held by live tensors of this rank
int64_t peak_bytes();     // high-water mark since the last reset
void reset_peak();
int64_t cached_bytes();   // bytes parked in the allocator's free lists (all ranks)
void release_cache();     // return cached blocks to the system
}  // namespace memory

// 64-byte aligned allocation with caching. `bytes` may be 0.
void* allocate(size_t bytes);
void deallocate(void* ptr, size_t bytes);

}  // namespace cpdit
