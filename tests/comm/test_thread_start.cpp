// A rank thread that cannot be created (the process is out of threads or address space) is a
// cpdit::Error naming it, after the ranks already started are stopped and joined; before, the
// half-built std::thread vector ended the process through std::terminate.
#include <cpdit/comm/local.hpp>
#include <cpdit/core/error.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <sys/resource.h>

namespace cpdit::comm {
namespace {

// The address space this process has mapped now, from /proc/self/status (VmSize, in KiB).
size_t mapped_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string key; status >> key;) {
    size_t kib = 0;
    if (key == "VmSize:" && status >> kib) return kib * 1024;
  }
  return 0;
}

// Exits 0 when 256 ranks under an address-space limit fail with the thread-start error.
[[noreturn]] void start_ranks_without_room() {
  // Room for a few 8 MiB thread stacks beyond what is mapped now: most of the 256 cannot start.
  const rlimit limit{mapped_bytes() + (64 << 20), RLIM_INFINITY};
  if (setrlimit(RLIMIT_AS, &limit) != 0) std::_Exit(3);
  try {
    run_local(256, [](Communicator& comm) { comm.barrier(); });
  } catch (const Error& e) {
    std::_Exit(std::string(e.what()).find("cannot start rank") != std::string::npos ? 0 : 2);
  }
  std::_Exit(1);
}

TEST(LocalRunDeathTest, ARankThreadThatCannotStartIsAnError) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer maps terabytes of shadow memory: an address-space limit cannot be set under it";
#endif
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(start_ranks_without_room(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace cpdit::comm
