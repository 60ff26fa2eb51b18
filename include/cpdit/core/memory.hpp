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
// size-bucketed free lists and handed out again. Cached blocks are not charged to any rank. The
// blocks of the process, in use and cached, are kept within an eighth above the most it had in use
// (since it started or the cache was last released): a miss that would go over first takes the
// pages of cached blocks of other sizes (moved, not touched afresh) or returns cached blocks.
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

// The caching allocator's blocks (whole buckets, all ranks of the process), in bytes.
struct AllocatorStats {
  int64_t in_use = 0;       // handed out and not yet freed
  int64_t cached = 0;       // parked in the free lists
  int64_t peak_in_use = 0;  // the most in use since the process started or release_cache
  int64_t misses = 0;       // allocations no cached block of their size served (counted since start)
  int64_t moved = 0;        // cached pages moved into blocks of other sizes on misses (since start)
};
AllocatorStats allocator_stats();
// Returns every cached block to the system and restarts the peak from what is in use: between the
// stages of a pipeline, whose blocks the next stage would not reuse.
void release_cache();
}  // namespace memory

// 64-byte aligned allocation with caching. `bytes` may be 0.
void* allocate(size_t bytes);
void deallocate(void* ptr, size_t bytes);

}  // namespace cpdit
