// The counter-based Gaussian generator: Philox4x32-10 against Random123's published known-answer
// vectors, determinism, shards equal to slices of the whole, and the moments of N(0, 1).
#include <cpdit/core/threads.hpp>
#include <cpdit/pipeline/random.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace cpdit;
using namespace cpdit::pipeline;

TEST(Random, PhiloxMatchesRandom123KnownAnswers) {
  using Block = std::array<uint32_t, 4>;
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}), (Block{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (Block{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (Block{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Random, SameSeedGivesBitwiseIdenticalValues) {
  const Tensor a = randn({2, 16, 24, 40}, 1234), b = randn({2, 16, 24, 40}, 1234);
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0);
  const Tensor c = randn({2, 16, 24, 40}, 1235);
  EXPECT_NE(std::memcmp(a.raw(), c.raw(), a.nbytes()), 0);
  // The high half of the seed matters too.
  const Tensor d = randn({2, 16, 24, 40}, 1234 + (uint64_t(1) << 32));
  EXPECT_NE(std::memcmp(a.raw(), d.raw(), a.nbytes()), 0);
}

TEST(Random, ThreadCountDoesNotChangeTheValues) {
  const Shape shape{1, 16, 2, 96, 96};  // large enough to be generated in parallel
  Tensor one, two;
  {
    ScopedComputeThreads threads(1);
    one = randn(shape, 31);
  }
  {
    ScopedComputeThreads threads(2);
    two = randn(shape, 31);
  }
  EXPECT_EQ(std::memcmp(one.raw(), two.raw(), one.nbytes()), 0);
}

TEST(Random, AnyRangeEqualsTheSliceOfTheWholeStream) {
  const int64_t n = 1001;
  const Tensor whole = randn({n}, 77);
  for (int64_t begin : {0, 1, 2, 3, 4, 5, 333, 998}) {
    for (int64_t count : {0, 1, 2, 3, 7, 3}) {
      if (begin + count > n) continue;
      std::vector<float> part(static_cast<size_t>(count));
      fill_normal(77, uint64_t(begin), part.data(), count);
      for (int64_t i = 0; i < count; ++i) {
        ASSERT_EQ(part[size_t(i)], whole.data<float>()[begin + i]) << begin << "+" << i;
      }
    }
  }
}

TEST(Random, MomentsAreThoseOfAStandardNormal) {
  const int64_t n = 1'000'000;
  const Tensor t = randn({n}, 42);
  double sum = 0, sum2 = 0, sum4 = 0;
  int64_t beyond_2sigma = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double x = t.data<float>()[i];
    ASSERT_TRUE(std::isfinite(x));
    sum += x;
    sum2 += x * x;
    sum4 += x * x * x * x;
    beyond_2sigma += std::fabs(x) > 2.0;
  }
  const double mean = sum / n, var = sum2 / n - mean * mean;
  // Standard errors for n = 1e6: mean 0.001, variance 0.0014, fourth moment 0.0098, tail 0.0002.
  EXPECT_NEAR(mean, 0.0, 0.005);
  EXPECT_NEAR(var, 1.0, 0.007);
  EXPECT_NEAR(sum4 / n, 3.0, 0.05);
  EXPECT_NEAR(double(beyond_2sigma) / n, 0.0455, 0.001);
}

TEST(Random, UniformStreamIsInRangeSliceableAndFlat) {
  std::vector<float> full(100003), part(1001);
  cpdit::pipeline::fill_uniform(9, 0, full.data(), int64_t(full.size()), -0.5f, 2.0f);
  cpdit::pipeline::fill_uniform(9, 777, part.data(), int64_t(part.size()), -0.5f, 2.0f);
  for (size_t i = 0; i < part.size(); ++i) ASSERT_EQ(part[i], full[777 + i]) << i;
  double sum = 0;
  for (float x : full) {
    ASSERT_GT(x, -0.5f);
    ASSERT_LT(x, 2.0f);
    sum += x;
  }
  EXPECT_NEAR(sum / double(full.size()), 0.75, 0.01);
}
