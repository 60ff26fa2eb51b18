#include <cpdit/core/error.hpp>
#include <cpdit/core/memory.hpp>

#include <sys/mman.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

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

namespace {

constexpr size_t kAlignment = 64;
// Blocks of at least a huge page start on one and ask the kernel for transparent huge pages (a hint;
// where THP is off it changes nothing). A (B, S, H, D) tensor's rows of one head lie H D floats
// apart, so a kernel walking one head touches a new 4 KiB page every row or so, and on 4 KiB pages
// the TLB misses cost the flash attention kernels about a quarter of their time (bench attention at
// S 2048, H 24: forward 81 -> 111, backward 85 -> 118 GFLOP per CPU second).
constexpr size_t kHugePage = size_t(2) << 20;

void* aligned_block(size_t size) {
  if (size < kHugePage) return std::aligned_alloc(kAlignment, size);
  // aligned_alloc wants a size that is a multiple of the alignment (AddressSanitizer refuses others).
  const size_t whole = (size + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, whole);
#ifdef MADV_HUGEPAGE
  if (p != nullptr) madvise(p, whole, MADV_HUGEPAGE);
#endif
  return p;
}

// Blocks are rounded up to a bucket size (powers of two split into eighths), so a freed block
// serves any later request of the same bucket: shapes that recur every step reuse their pages.
size_t bucket_size(size_t bytes) {
  if (bytes <= 4096) return 4096;
  size_t power = 4096;
  while (power < bytes) power <<= 1;
  size_t step = power / 8;  // at most 1/4 wasted above power/2
  return ((bytes + step - 1) / step) * step;
}

class BlockCache {
 public:
  void* take(size_t size) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(size);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_ -= int64_t(size);
        return p;
      }
    }
    void* p = aligned_block(size);
    if (p == nullptr && cached() > 0) {
      // The blocks parked for other sizes may be what stands in the way (a staged pipeline frees the
      // text encoder's activations before the transformer asks for its own): return them and retry once.
      release();
      p = aligned_block(size);
    }
    CPDIT_CHECK(p != nullptr, io, "out of memory allocating ", size, " bytes");
    return p;
  }

  void give(void* p, size_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_[size].push_back(p);
    cached_ += int64_t(size);
  }

  int64_t cached() {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_;
  }

  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [size, blocks] : free_)
      for (void* p : blocks) std::free(p);
    free_.clear();
    cached_ = 0;
  }

  ~BlockCache() { release(); }

 private:
  std::mutex mutex_;
  std::map<size_t, std::vector<void*>> free_;
  int64_t cached_ = 0;
};

BlockCache& cache() {
  static BlockCache instance;
  return instance;
}

}  // namespace

void* allocate(size_t bytes) { return cache().take(bucket_size(bytes)); }

void deallocate(void* ptr, size_t bytes) {
  if (ptr) cache().give(ptr, bucket_size(bytes));
}

namespace memory {
int64_t current_bytes() { return current_memory_counter().current(); }
int64_t peak_bytes() { return current_memory_counter().peak(); }
void reset_peak() { current_memory_counter().reset_peak(); }
int64_t cached_bytes() { return cache().cached(); }
void release_cache() { cache().release(); }
}  // namespace memory

}  // namespace cpdit
