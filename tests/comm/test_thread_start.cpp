// A rank thread that cannot be created (the process is out of threads or address space) is a
// cpdit::Error naming it, after the ranks already started are stopped and joined; before, the
// half-built std::thread vector ended the process through std::terminate.
#include "support/address_space.hpp"

#include <cpdit/comm/local.hpp>
#include <cpdit/core/error.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace cpdit::comm {
namespace {

// Exits 0 when 256 ranks under an address-space limit fail with the thread-start error.
[[noreturn]] void start_ranks_without_room() {
  // Room for a few 8 MiB thread stacks: most of the 256 cannot start.
  if (!testing::limit_address_space(64 << 20)) std::_Exit(3);
  try {
    run_local(256, [](Communicator& comm) { comm.barrier(); });
  } catch (const Error& e) {
    std::_Exit(std::string(e.what()).find("cannot start rank") != std::string::npos ? 0 : 2);
  }
  std::_Exit(1);
}

TEST(LocalRunDeathTest, ARankThreadThatCannotStartIsAnError) {
  if (!testing::kAddressSpaceLimitWorks) GTEST_SKIP() << "an address-space limit cannot be set under a sanitizer";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(start_ranks_without_room(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace cpdit::comm
