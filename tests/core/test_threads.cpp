// hardware_threads() counts the cores this process may use, not the machine's: a rank bound to one
// core (taskset, mpirun's binding) that started a thread per machine core would oversubscribe it.
#include <cpdit/core/threads.hpp>

#include <gtest/gtest.h>

#include <cstdlib>

#include <sched.h>

namespace {

TEST(HardwareThreadsDeathTest, FollowsTheCpuAffinity) {
  // In a child, so the test process keeps its own affinity.
  EXPECT_EXIT(
      {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(0, &one);
        if (sched_setaffinity(0, sizeof(one), &one) != 0) std::_Exit(3);
        std::_Exit(cpdit::hardware_threads() == 1 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
