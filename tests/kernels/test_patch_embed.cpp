#include "kernels/reference.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>

#include <gtest/gtest.h>

using namespace cpdit;
using cpdit::test::expect_within;
using cpdit::test::random_tensor;
using cpdit::test::to_double;

// The direct definition of a strided Conv3d (kernel == stride), in double, laid out as tokens.
TEST(PatchEmbed, EqualsStridedConv3dAsTokens) {
  const int64_t B = 2, C = 3, F = 4, H = 6, W = 4, O = 5;
  const std::array<int64_t, 3> k{2, 3, 2};
  Tensor x = random_tensor({B, C, F, H, W}, 1), w = random_tensor({O, C, k[0], k[1], k[2]}, 2);
  Tensor b = random_tensor({O}, 3);
  Tensor y = kernels::patch_embed(x, w, b, k);
  const int64_t pf = F / k[0], ph = H / k[1], pw = W / k[2];
  ASSERT_EQ(y.shape(), (Shape{B, pf * ph * pw, O}));
  auto xv = to_double(x), wv = to_double(w), bv = to_double(b);
  std::vector<double> want, bound;
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t f = 0; f < pf; ++f)
      for (int64_t h = 0; h < ph; ++h)
        for (int64_t ww = 0; ww < pw; ++ww)
          for (int64_t o = 0; o < O; ++o) {
            double sum = bv[size_t(o)], magnitude = std::abs(sum);
            for (int64_t c = 0; c < C; ++c)
              for (int64_t i = 0; i < k[0]; ++i)
                for (int64_t j = 0; j < k[1]; ++j)
                  for (int64_t l = 0; l < k[2]; ++l) {
                    double xi = xv[size_t((((bi * C + c) * F + f * k[0] + i) * H + h * k[1] + j) * W + ww * k[2] + l)];
                    double wi = wv[size_t((((o * C + c) * k[0] + i) * k[1] + j) * k[2] + l)];
                    sum += xi * wi;
                    magnitude += std::abs(xi * wi);
                  }
            want.push_back(sum);
            bound.push_back(1e-5 * magnitude);
          }
  expect_within(y, want, bound);
}

TEST(PatchEmbed, RejectsIndivisibleInputAndWrongWeight) {
  Tensor x = random_tensor({1, 2, 1, 5, 4}, 1);
  EXPECT_THROW(kernels::patch_embed(x, random_tensor({3, 2, 1, 2, 2}, 2), {}, {1, 2, 2}), Error);
  Tensor even = random_tensor({1, 2, 1, 4, 4}, 3);
  EXPECT_THROW(kernels::patch_embed(even, random_tensor({3, 1, 1, 2, 2}, 4), {}, {1, 2, 2}), Error);
}
