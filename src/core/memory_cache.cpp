// The caching allocator behind every Tensor (core/memory.hpp): freed blocks are parked by size and
// handed out again, so that shapes which recur (every denoising step) touch no fresh pages, while the
// blocks it holds, in use and parked, stay within an eighth above the most it ever had in use.
#include <cpdit/core/error.hpp>
#include <cpdit/core/memory.hpp>

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <list>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace cpdit {
namespace {

constexpr size_t kAlignment = 64;
// Blocks of at least a huge page are mappings of their own, start on a huge page and ask the kernel
// for transparent huge pages (a hint; where THP is off it changes nothing). A (B, S, H, D) tensor's
// rows of one head lie H D floats apart, so a kernel walking one head touches a new 4 KiB page every
// row or so, and on 4 KiB pages the TLB misses cost the flash attention kernels about a quarter of
// their time (bench attention at S 2048, H 24: forward 81 -> 111, backward 85 -> 118 GFLOP per CPU
// second). Being mappings, their pages can also be moved into a new block (mremap) without being
// touched afresh.
constexpr size_t kHugePage = size_t(2) << 20;

size_t round_up(size_t bytes, size_t step) { return (bytes + step - 1) / step * step; }

// Blocks are rounded up to a bucket size (powers of two split into eighths, whole huge pages from
// 2 MiB), so a freed block serves any later request of the same bucket.
size_t bucket_size(size_t bytes) {
  if (bytes <= 4096) return 4096;
  size_t power = 4096;
  while (power < bytes) power <<= 1;
  const size_t bucket = round_up(bytes, power / 8);  // at most 1/4 wasted above power/2
  return bucket < kHugePage ? bucket : round_up(bucket, kHugePage);
}

bool is_mapping(size_t size) { return size >= kHugePage; }

// A fresh anonymous mapping of `size` (whole huge pages) starting on a huge page, or nullptr. Its pages
// take memory only once touched.
std::byte* map_pages(size_t size) {
  void* p = mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* start = static_cast<std::byte*>(p);
  auto* aligned = reinterpret_cast<std::byte*>(round_up(reinterpret_cast<uintptr_t>(start), kHugePage));
  if (aligned > start) munmap(start, size_t(aligned - start));
  munmap(aligned + size, size_t(start + size + kHugePage - (aligned + size)));
#ifdef MADV_HUGEPAGE
  madvise(aligned, size, MADV_HUGEPAGE);
#endif
  return aligned;
}

std::byte* new_block(size_t size) {
  return is_mapping(size) ? map_pages(size) : static_cast<std::byte*>(std::aligned_alloc(kAlignment, size));
}

struct Block {
  std::byte* pages;
  size_t size;
};

void free_block(const Block& b) {
  if (is_mapping(b.size))
    munmap(b.pages, b.size);
  else
    std::free(b.pages);
}

// Parked pages to move into a new block, at `offset` in it.
struct Piece {
  Block from;
  size_t offset;
};

class BlockCache {
 public:
  void* take(size_t size) {
    std::vector<Piece> pieces;
    std::vector<Block> evicted;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      in_use_ += int64_t(size);
      peak_ = std::max(peak_, in_use_);
      if (std::byte* p = unpark_newest(size)) return p;
      ++misses_;
      if (is_mapping(size)) pieces = pages_for(size);
      while (held() > limit() && !parked_.empty()) evicted.push_back(take_parked(parked_.begin(), SIZE_MAX));
    }
    for (const Block& b : evicted) free_block(b);
    std::byte* p = new_block(size);
    if (p == nullptr) {
      // What stands in the way may be parked blocks the limit allowed (a staged pipeline frees the
      // text encoder's activations before the transformer asks for its own): return them, retry once.
      release();
      p = new_block(size);
    }
    if (p == nullptr) {
      for (const Piece& e : pieces) free_block(e.from);
      std::lock_guard<std::mutex> lock(mutex_);
      in_use_ -= int64_t(size);
    }
    CPDIT_CHECK(p != nullptr, io, "out of memory allocating ", size, " bytes");
    move_pieces(p, pieces);
    return p;
  }

  void give(void* p, size_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    in_use_ -= int64_t(size);
    parked_.push_back({static_cast<std::byte*>(p), size});
    by_size_[size].push_back(std::prev(parked_.end()));
    cached_ += int64_t(size);
  }

  memory::AllocatorStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return {in_use_, cached_, peak_, misses_, moved_};
  }

  void release() {
    std::list<Block> all;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      all.swap(parked_);
      by_size_.clear();
      cached_ = 0;
      peak_ = in_use_;
    }
    for (const Block& b : all) free_block(b);
  }

 private:
  using Parked = std::list<Block>::iterator;

  // What the blocks in use and parked may add up to: the peak in use, and an eighth of it for
  // patterns that need other sizes at other times than at the peak (a denoising step's attention
  // and feed-forward), so that they are still served from the cache step after step.
  int64_t limit() const { return peak_ + peak_ / 8; }
  int64_t held() const { return in_use_ + cached_; }

  std::byte* unpark_newest(size_t size) {
    auto same = by_size_.find(size);
    if (same == by_size_.end()) return nullptr;
    return take_parked(same->second.back(), SIZE_MAX).pages;
  }

  // Takes a parked block out of the cache, or only its first `most` bytes (the rest stays parked).
  Block take_parked(Parked it, size_t most) {
    auto same = by_size_.find(it->size);
    same->second.erase(std::find(same->second.begin(), same->second.end(), it));
    if (same->second.empty()) by_size_.erase(same);
    Block taken = *it;
    if (taken.size > most) {
      taken.size = most;
      it->pages += most;
      it->size -= most;
      by_size_[it->size].push_front(it);
    } else {
      parked_.erase(it);
    }
    cached_ -= int64_t(taken.size);
    return taken;
  }

  // Where a new mapping of `size` takes the held bytes over the limit: pages of parked mappings
  // (oldest first; whole huge pages, as every mapping's size is) to move into it, as many as bring
  // the held bytes back to the limit, instead of touching as many fresh ones.
  std::vector<Piece> pages_for(size_t size) {
    std::vector<Piece> pieces;
    size_t filled = 0;
    for (auto it = parked_.begin(); it != parked_.end() && filled < size && held() > limit();) {
      const Parked block = it++;
      if (!is_mapping(block->size)) continue;
      const size_t over = round_up(size_t(held() - limit()), kHugePage);
      pieces.push_back({take_parked(block, std::min(size - filled, over)), filled});
      filled += pieces.back().from.size;
      moved_ += int64_t(pieces.back().from.size);
    }
    return pieces;
  }

  // Moves each piece's pages to their place in `block`, a fresh mapping whose other pages are touched
  // afresh. Where the kernel refuses (too many mappings), the piece is returned instead.
  static void move_pieces(std::byte* block, const std::vector<Piece>& pieces) {
    for (const Piece& e : pieces)
      if (mremap(e.from.pages, e.from.size, e.from.size, MREMAP_MAYMOVE | MREMAP_FIXED, block + e.offset) == MAP_FAILED)
        free_block(e.from);
  }

  std::mutex mutex_;
  std::list<Block> parked_;                                 // oldest first
  std::unordered_map<size_t, std::deque<Parked>> by_size_;  // each size's parked blocks, newest last
  int64_t in_use_ = 0, cached_ = 0, peak_ = 0, misses_ = 0, moved_ = 0;
};

// Never destroyed: tensors held by other static objects (caches, test references) are freed during
// exit, possibly after this one would have been, and must still find it.
BlockCache& cache() {
  static BlockCache* instance = new BlockCache;
  return *instance;
}

}  // namespace

void* allocate(size_t bytes) { return cache().take(bucket_size(bytes)); }

void deallocate(void* ptr, size_t bytes) {
  if (ptr) cache().give(ptr, bucket_size(bytes));
}

namespace memory {
AllocatorStats allocator_stats() { return cache().stats(); }
void release_cache() { cache().release(); }
}  // namespace memory

}  // namespace cpdit
