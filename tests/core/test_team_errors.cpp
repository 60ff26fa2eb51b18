// TeamErrors carries an exception thrown inside an OpenMP region out of it as itself (without it
// the runtime calls std::terminate), and the iterations after the failure are skipped.
#include <cpdit/core/error.hpp>
#include <cpdit/core/team_errors.hpp>

#include <gtest/gtest.h>

#include <atomic>

namespace cpdit {
namespace {

TEST(TeamErrors, AnExceptionInsideARegionIsRethrownAfterIt) {
  TeamErrors errors;
  std::atomic<int> ran{0};
  const int n = 10000;
#pragma omp parallel for num_threads(4) schedule(static, 1)
  for (int i = 0; i < n; ++i)
    errors.run([&] {
      ++ran;
      if (i == 3) fail(ErrorKind::internal, "gemm refused iteration ", i);
    });
  try {
    errors.rethrow();
    FAIL() << "the exception was lost";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::internal);
    EXPECT_STREQ(e.what(), "gemm refused iteration 3");
  }
  EXPECT_LT(ran.load(), n);  // the team stopped early
}

TEST(TeamErrors, NothingThrownIsNothingRethrown) {
  TeamErrors errors;
  int sum = 0;
#pragma omp parallel for num_threads(4) reduction(+ : sum)
  for (int i = 0; i < 100; ++i) errors.run([&] { sum += i; });
  EXPECT_NO_THROW(errors.rethrow());
  EXPECT_EQ(sum, 4950);
}

}  // namespace
}  // namespace cpdit
