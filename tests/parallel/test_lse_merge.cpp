// The LSE merge: splitting the keys and merging equals attending to all of them, in any
// order, without overflow, and with the -inf guard.
#include "support/random_normal.hpp"

#include <cpdit/attention/attention.hpp>
#include <cpdit/parallel/lse_merge.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace cpdit::parallel {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

using cpdit::testing::random_normal;

TEST(LseMerge, ThreeKeyChunksInAnyOrderEqualAllKeys) {
  const Tensor q = random_normal({2, 9, 3, 8}, 1), k = random_normal({2, 30, 3, 8}, 2),
               v = random_normal({2, 30, 3, 8}, 3);
  const auto& flash = attention::backend("flash");
  const float scale = 0.35f;
  const attention::Result full = flash.forward(q, k, v, {}, scale);
  const int64_t starts[] = {20, 0, 7}, lengths[] = {10, 7, 13};
  PartialAttention acc = PartialAttention::empty(2, 9, 3, 8);
  for (int c = 0; c < 3; ++c) {
    const auto part = flash.forward(q, k.narrow(1, starts[c], lengths[c]).contiguous(),
                                    v.narrow(1, starts[c], lengths[c]).contiguous(), {}, scale);
    merge_into(acc, part.out, part.lse);
  }
  EXPECT_LE(max_abs_diff(acc.out, full.out), 1e-6);
  EXPECT_LE(max_abs_diff(acc.lse, full.lse), 1e-5);
}

TEST(LseMerge, HugeLseDoesNotOverflow) {
  PartialAttention acc = PartialAttention::empty(1, 1, 1, 1);
  merge_into(acc, Tensor::full({1, 1, 1, 1}, 1.0), Tensor::full({1, 1, 1}, 100.0));
  merge_into(acc, Tensor::full({1, 1, 1, 1}, 3.0), Tensor::full({1, 1, 1}, 100.0));
  // Two equal weights: the mean, and lse + ln 2. The naive exp(100) form overflows in f32.
  EXPECT_FLOAT_EQ(acc.out.data<float>()[0], 2.0f);
  EXPECT_NEAR(acc.lse.data<float>()[0], 100.0f + std::log(2.0f), 1e-5);
}

TEST(LseMerge, MinusInfinityGuard) {
  // A row that has seen no keys takes the chunk; a chunk without keys leaves the row; two empty
  // sides stay (0, -inf), never NaN.
  PartialAttention acc = PartialAttention::empty(1, 2, 1, 2);
  merge_into(acc, Tensor::zeros({1, 2, 1, 2}), Tensor::full({1, 1, 2}, -kInf));
  EXPECT_EQ(acc.out.data<float>()[0], 0.0f);
  EXPECT_EQ(acc.lse.data<float>()[0], -kInf);
  Tensor lse = Tensor::from_vector({0.5f, -kInf}, {1, 1, 2});
  merge_into(acc, Tensor::full({1, 2, 1, 2}, 4.0), lse);
  EXPECT_EQ(acc.out.data<float>()[0], 4.0f);
  EXPECT_EQ(acc.lse.data<float>()[0], 0.5f);
  EXPECT_EQ(acc.out.data<float>()[2], 0.0f);  // row 1: still no keys
  EXPECT_EQ(acc.lse.data<float>()[1], -kInf);
  merge_into(acc, Tensor::full({1, 2, 1, 2}, 9.0), Tensor::full({1, 1, 2}, -kInf));
  EXPECT_EQ(acc.out.data<float>()[0], 4.0f);
  EXPECT_EQ(acc.lse.data<float>()[0], 0.5f);
}

}  // namespace
}  // namespace cpdit::parallel
