#pragma once
// Per-rank memory accounting and the caching allocator behind every Tensor.
//
// Accounting: every byte a Tensor owns is charged to the MemoryCounter of the rank that allocated it
// (the thread's current counter; one process-wide counter by default). Ranks run as threads in one
// process, so each rank installs its own counter with ScopedMemoryCounter. Freed storage is credited
// back to the counter it was charged to, whichever thread frees it — even after that counter object
// is gone (a tensor may outlive the rank that made it), since storage shares the counts.
//
// Caching: first writes to fresh pages are very slow on some hosts, so freed blocks are kept in
// size-bucketed free lists and handed out again. Cached blocks are not charged to any rank.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace cpdit {

class MemoryCounter {
 public:
  struct Counts {
    std::atomic<int64_t> current{0};
    std::atomic<int64_t> peak{0};
    void add(int64_t bytes);
    void sub(int64_t bytes) { current.fetch_sub(bytes, std::memory_order_relaxed); }
  };

  void add(int64_t bytes) { counts_->add(bytes); }
  void sub(int64_t bytes) { counts_->sub(bytes); }
  int64_t current() const { return counts_->current.load(std::memory_order_relaxed); }
  int64_t peak() const { return counts_->peak.load(std::memory_order_relaxed); }
  void reset_peak() { counts_->peak.store(current(), std::memory_order_relaxed); }
  // What a storage holds on to, so that freeing it later credits the right rank.
  std::shared_ptr<Counts> counts() const { return counts_; }

 private:
  std::shared_ptr<Counts> counts_ = std::make_shared<Counts>();
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
