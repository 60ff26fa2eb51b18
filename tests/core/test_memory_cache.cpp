// The caching allocator's two promises: shapes that recur are served from its cache, and the blocks it
// holds, in use and cached, never add up to more than an eighth above the most it had in use.
#include <cpdit/core/memory.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <random>
#include <utility>

namespace cpdit {
namespace {

constexpr size_t kMiB = size_t(1) << 20;

int64_t held(const memory::AllocatorStats& s) { return s.in_use + s.cached; }
int64_t limit(const memory::AllocatorStats& s) { return s.peak_in_use + s.peak_in_use / 8; }

TEST(MemoryCache, ManySizesStayWithinAnEighthOfThePeak) {
  memory::release_cache();
  // A few blocks live at a time, of sizes from 4 KiB to 96 MiB (small heap blocks and page mappings
  // alike), as a VAE at many resolutions or staged models ask: without the limit every size's free
  // list would keep its blocks, and the cache would grow to the sum of all sizes. Blocks are not
  // touched, so only address space is used.
  std::mt19937 random(7);
  std::uniform_int_distribution<size_t> size(4096, 96 * kMiB);
  std::deque<std::pair<void*, size_t>> live;
  for (int i = 0; i < 400; ++i) {
    const size_t bytes = i % 3 ? size(random) : size(random) / 512;
    live.emplace_back(allocate(bytes), bytes);
    if (live.size() > 3) {
      deallocate(live.front().first, live.front().second);
      live.pop_front();
    }
    const memory::AllocatorStats s = memory::allocator_stats();
    ASSERT_LE(held(s), limit(s)) << "after allocation " << i;
  }
  for (auto& [p, bytes] : live) deallocate(p, bytes);
  const memory::AllocatorStats s = memory::allocator_stats();
  EXPECT_LE(held(s), limit(s));
  // The peak of four live blocks of at most 96 MiB (rounded up by at most a quarter).
  EXPECT_LE(s.peak_in_use, int64_t(4 * 120 * kMiB));
}

// One step of a transformer block's pattern: the residual stream, then q, k, v and the attention
// output (one width each), then the feed-forward's two wide activations and a small temporary.
void step() {
  constexpr size_t width = 4 * kMiB, wide = 16 * kMiB, small = 64 * 1024;
  void* x = allocate(width);
  void* qkv[3] = {allocate(width), allocate(width), allocate(width)};
  void* o = allocate(width);
  for (void* p : qkv) deallocate(p, width);
  void* t = allocate(small);
  void* h = allocate(wide);
  deallocate(t, small);
  void* g = allocate(wide);
  deallocate(h, wide);
  deallocate(g, wide);
  deallocate(o, width);
  deallocate(x, width);
}

TEST(MemoryCache, ARecurringPatternIsServedFromTheCache) {
  memory::release_cache();
  // The model's weights, in use throughout (not touched): with them the peak is 200 MiB, and the
  // step's blocks (20 MiB of one width at attention, 32 MiB of the other at the feed-forward, never
  // all at once) fit within the eighth above it.
  constexpr size_t weight_bytes = 160 * kMiB;
  void* weights = allocate(weight_bytes);
  step();
  const memory::AllocatorStats first = memory::allocator_stats();
  EXPECT_GT(first.misses, 0);  // the first step makes its blocks
  for (int i = 0; i < 10; ++i) step();
  const memory::AllocatorStats later = memory::allocator_stats();
  EXPECT_EQ(later.misses, first.misses);
  EXPECT_EQ(later.moved, first.moved);
  EXPECT_EQ(held(later), held(first));
  deallocate(weights, weight_bytes);
}

TEST(MemoryCache, AMissOverTheLimitMovesCachedPagesInsteadOfTouchingFreshOnes) {
  memory::release_cache();
  const int64_t base = memory::allocator_stats().in_use;
  ASSERT_LT(base, int64_t(2 * kMiB));  // what this test's arithmetic allows to be in use already
  // A 16 MiB block, written and freed: the peak is 16 MiB (plus whatever was in use), the limit an
  // eighth above it.
  auto* first = static_cast<unsigned char*>(allocate(16 * kMiB));
  std::memset(first, 0xab, 16 * kMiB);
  deallocate(first, 16 * kMiB);
  const memory::AllocatorStats before = memory::allocator_stats();
  ASSERT_EQ(before.peak_in_use, base + int64_t(16 * kMiB));
  // An 8 MiB block would take the held bytes 8 MiB over the peak: the excess over the limit, rounded
  // up to whole huge pages, comes from the parked block's pages, which keep what was written to them.
  auto* second = static_cast<unsigned char*>(allocate(8 * kMiB));
  const memory::AllocatorStats after = memory::allocator_stats();
  const size_t over = size_t(base + 24 * kMiB - limit(before));
  const size_t moved = (over + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB);
  EXPECT_EQ(after.moved - before.moved, int64_t(moved));
  EXPECT_LE(held(after), limit(after));
  size_t still_written = 0;
  while (still_written < 8 * kMiB && second[still_written] == 0xab) ++still_written;
  EXPECT_EQ(still_written, moved);  // the moved pages hold the old bytes; the rest are fresh (zero)
  EXPECT_EQ(second[8 * kMiB - 1], 0);
  deallocate(second, 8 * kMiB);
}

TEST(MemoryCache, ReleasingTheCacheRestartsThePeak) {
  void* p = allocate(32 * kMiB);
  deallocate(p, 32 * kMiB);
  memory::release_cache();
  const memory::AllocatorStats s = memory::allocator_stats();
  EXPECT_EQ(s.cached, 0);
  EXPECT_EQ(s.peak_in_use, s.in_use);
}

}  // namespace
}  // namespace cpdit
