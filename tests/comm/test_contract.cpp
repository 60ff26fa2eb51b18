// The contract suite on the local engine for N = 1..5 ranks (heavy checks at N = 3 only); the MPI
// runs of the same checks are in extra.cmake.
#include "checks.hpp"

#include <cpdit/comm/local.hpp>

#include <gtest/gtest.h>

namespace cpdit::comm::testing {
namespace {

struct Case {
  int ranks;
  size_t check;
};

class LocalContract : public ::testing::TestWithParam<Case> {};

TEST_P(LocalContract, Holds) {
  const Check& check = contract_checks()[GetParam().check];
  LocalOptions options;
  options.comm.timeout = std::chrono::seconds(60);  // a hang becomes a failure well inside ctest's limit
  run_local(GetParam().ranks, [&](Communicator& comm) { check.run(comm); }, options);
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (int ranks = 1; ranks <= 5; ++ranks)
    for (size_t i = 0; i < contract_checks().size(); ++i)
      if (!contract_checks()[i].heavy || ranks == 3) cases.push_back({ranks, i});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Local, LocalContract, ::testing::ValuesIn(all_cases()), [](const auto& info) {
  return contract_checks()[info.param.check].name + "_n" + std::to_string(info.param.ranks);
});

}  // namespace
}  // namespace cpdit::comm::testing
