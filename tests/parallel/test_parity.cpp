// Every context-parallel mode against the single-rank flash result, and position rules against the
// float64 reference (local engine, threads as ranks): forward out/lse and backward dq/dk/dv, over
// the matrices in cp_case.cpp.
#include "parallel/cp_case.hpp"

#include <cpdit/comm/local.hpp>

#include <gtest/gtest.h>

#include <mutex>

namespace cpdit::parallel::test {
namespace {

// Runs the case on ring x Ulysses thread ranks and checks every rank's errors against the tolerances.
void expect_parity(const CpCase& c) {
  std::mutex mutex;
  std::vector<CpErrors> per_rank(size_t(c.ring * c.ulysses));
  comm::run_local(c.ring * c.ulysses, [&](comm::Communicator& comm) {
    std::shared_ptr<comm::Communicator> world(&comm, [](comm::Communicator*) {});
    const CpErrors e = check_case(world, c);
    std::lock_guard lock(mutex);
    per_rank[size_t(comm.rank())] = e;
  });
  for (const CpErrors& e : per_rank) {
    EXPECT_LE(e.out, out_tolerance(c));
    EXPECT_LE(e.lse, 1e-5);
    EXPECT_LE(e.dq, grad_tolerance(c));
    EXPECT_LE(e.dk, grad_tolerance(c));
    EXPECT_LE(e.dv, grad_tolerance(c));
  }
}

class Parity : public ::testing::TestWithParam<CpCase> {};
TEST_P(Parity, MatchesSingleRankFlash) { expect_parity(GetParam()); }

// Causal and block-causal rules against the float64 dense reference.
class RuleParity : public ::testing::TestWithParam<CpCase> {};
TEST_P(RuleParity, MatchesFloat64Dense) { expect_parity(GetParam()); }

INSTANTIATE_TEST_SUITE_P(ContextParallel, Parity, ::testing::ValuesIn(local_matrix()),
                         [](const auto& info) { return info.param.name(); });
INSTANTIATE_TEST_SUITE_P(MaskRules, RuleParity, ::testing::ValuesIn(rule_matrix()),
                         [](const auto& info) { return info.param.name(); });

}  // namespace
}  // namespace cpdit::parallel::test
