// The caching allocator gives its parked blocks back to the system and retries once when an
// allocation fails: a block of a new size fits where the cache of another size stood in the way,
// even while the cache is within its limit (the system may have less room than the process's peak).
#include "support/address_space.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/core/memory.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

namespace cpdit {
namespace {

[[noreturn]] void allocate_past_the_cache() {
  constexpr size_t mib = size_t(1) << 20;
  // 200 MiB, used and freed: parked in the cache (a 224 MiB bucket), still mapped.
  void* first = allocate(200 * mib);
  std::memset(first, 1, 4096);
  deallocate(first, 200 * mib);
  // 4 MiB more than is mapped now: an 8 MiB block (well within the cache's limit of the 224 MiB
  // peak) fits only once the parked block is returned.
  if (!testing::limit_address_space(4 * mib)) std::_Exit(3);
  try {
    void* second = allocate(8 * mib);
    std::memset(second, 2, 4096);
    deallocate(second, 8 * mib);
  } catch (const Error&) {
    std::_Exit(1);
  }
  std::_Exit(memory::allocator_stats().cached == int64_t(8 * mib) ? 0 : 2);
}

TEST(AllocatorDeathTest, AFailedAllocationReleasesTheCacheAndRetries) {
  if (!testing::kAddressSpaceLimitWorks) GTEST_SKIP() << "an address-space limit cannot be set under a sanitizer";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(allocate_past_the_cache(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace cpdit
