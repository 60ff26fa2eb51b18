// predict_cond_uncond (pipeline/guidance.hpp), serial and CFG-parallel: on two rank groups each group
// runs only its own pass, and every rank ends with the serial pair and the serial combined result.
#include "support/random_normal.hpp"

#include <cpdit/comm/local.hpp>
#include <cpdit/comm/mesh.hpp>
#include <cpdit/pipeline/guidance.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <vector>

namespace cpdit::pipeline {
namespace {

TEST(Guidance, SerialRunsBothPassesOnThisRank) {
  const Tensor cond = testing::random_normal({2, 3}, 1), uncond = testing::random_normal({2, 3}, 2);
  int calls = 0;
  const GuidancePair pair = predict_cond_uncond(
      [&] {
        ++calls;
        return cond;
      },
      [&] {
        ++calls;
        return uncond;
      },
      nullptr);
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(pair.cond.same_storage(cond) && pair.uncond.same_storage(uncond));
}

// 2 CFG groups of ring 2 (4 ranks): group c's ranks run pass c only, and each rank receives the other
// pass from its peer at the same ring position, whose prediction differs from the other rank's.
TEST(Guidance, CfgParallelGroupsRunOnePassEachAndSwapWithTheirPeer) {
  constexpr int kRanks = 4, kRing = 2;
  std::atomic<int> cond_calls{0}, uncond_calls{0};
  std::vector<int> failures(kRanks, 0);
  comm::run_local(kRanks, [&](comm::Communicator& world) {
    comm::Mesh mesh(std::shared_ptr<comm::Communicator>(std::shared_ptr<comm::Communicator>{}, &world), kRing, 1, 2);
    // Each ring position holds its own shard: a prediction that depends on the position and the pass.
    const unsigned shard = unsigned(mesh.ring_rank());
    const Tensor cond = testing::random_normal({2, 5}, 10 + shard), uncond = testing::random_normal({2, 5}, 20 + shard);
    const GuidancePair pair = predict_cond_uncond(
        [&] { ++cond_calls; EXPECT_EQ(mesh.cfg_rank(), 0); return cond; },
        [&] { ++uncond_calls; EXPECT_EQ(mesh.cfg_rank(), 1); return uncond; }, &mesh.cfg());
    const Tensor serial = combine_guidance(cond, uncond, {4.5f}),
                 parallel = combine_guidance(pair.cond, pair.uncond, {4.5f});
    if (max_abs_diff(pair.cond, cond) != 0.0 || max_abs_diff(pair.uncond, uncond) != 0.0 ||
        max_abs_diff(parallel, serial) != 0.0)
      failures[size_t(world.rank())] = 1;
  });
  EXPECT_EQ(cond_calls.load(), kRanks / 2);
  EXPECT_EQ(uncond_calls.load(), kRanks / 2);
  EXPECT_EQ(failures, std::vector<int>(kRanks, 0));
}

}  // namespace
}  // namespace cpdit::pipeline
