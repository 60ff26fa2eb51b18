// The caching allocator gives its parked blocks back to the system and retries once when an
// allocation fails: a block of a new size fits where the cache of another size stood in the way.
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
  if (!testing::limit_address_space(256 * mib)) std::_Exit(3);
  // 200 MiB, used and freed: parked in the cache (a 224 MiB bucket), still mapped.
  void* first = allocate(200 * mib);
  std::memset(first, 1, 4096);
  deallocate(first, 200 * mib);
  // 150 MiB (a 160 MiB bucket) fits in the limit only once the parked block is returned.
  try {
    void* second = allocate(150 * mib);
    std::memset(second, 2, 4096);
    deallocate(second, 150 * mib);
  } catch (const Error&) {
    std::_Exit(1);
  }
  std::_Exit(memory::cached_bytes() == int64_t(160 * mib) ? 0 : 2);
}

TEST(AllocatorDeathTest, AFailedAllocationReleasesTheCacheAndRetries) {
  if (!testing::kAddressSpaceLimitWorks) GTEST_SKIP() << "an address-space limit cannot be set under a sanitizer";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(allocate_past_the_cache(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace cpdit
