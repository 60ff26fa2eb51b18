// The row split's pieces on their own: a convolution whose halo is two rows (kernel 5), strided in
// columns and causal in time, and a GroupNorm, each on the bands of 2, 3 and 4 ranks, equal the
// one-rank result (the rows of 11 divide by none of them).
#include "kernels/reference.hpp"
#include "parallel/bound_ranks.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/parallel/context.hpp>
#include <cpdit/parallel/halo.hpp>
#include <cpdit/parallel/shard.hpp>

#include <gtest/gtest.h>

namespace cpdit::parallel {
namespace {

using test::random_tensor;

// max |gathered - whole| over every rank, of fn run on each rank's band of x (rows = dim 3) with the
// row split bound (a ring ParallelContext), against fn on the whole of x with nothing bound.
double band_error(int ranks, const Tensor& x, const std::function<Tensor(const Tensor&)>& fn) {
  return test::worst_rank_error(ranks, ContextParallelConfig{ranks, 1}, fn(x), [&](comm::Communicator& comm) {
    return gather(fn(shard(x, 3, comm)), 3, comm);
  });
}

TEST(Halo, ConvolutionWithATwoRowHaloEqualsTheWholeImage) {
  const Tensor x = random_tensor({1, 3, 2, 11, 9}, 1), w = random_tensor({4, 3, 2, 5, 3}, 2), b = random_tensor({4}, 3);
  kernels::ConvGeometry g;
  g.stride = {1, 1, 2};
  g.pad_before = {1, 2, 1};
  g.pad_after = {0, 2, 1};
  for (int ranks : {2, 3, 4})
    // Each output is the same sum of the same products on every rank count: only oneDNN's blocking
    // may order it differently, a few f32 ulps of sums of 90 O(1) products.
    EXPECT_LE(band_error(ranks, x, [&](const Tensor& t) { return conv3d_rows(t, w, b, g); }), 1e-5) << ranks;
}

// A layer wide and large enough for Winograd (256 channels, 4 frames of 64x64 = 128x128 output pixels)
// sums by Winograd on 2 ranks too, though each 32-row band alone would be below the size where it
// pays: the choice counts the whole layer. The bands start at a multiple of Winograd's 4-row output
// tile, so they sum the very tiles one rank sums, bit for bit; a band summed directly would differ
// by f32 rounding.
TEST(Halo, AWideLayerSumsByWinogradOnEveryRankCount) {
  if (!kernels::winograd_available()) GTEST_SKIP() << "oneDNN has no Winograd convolution on this CPU (AVX-512 needed)";
  const Tensor x = random_tensor({1, 256, 4, 64, 64}, 9), w = random_tensor({256, 256, 1, 3, 3}, 10, -0.05f, 0.05f);
  const kernels::ConvGeometry g = kernels::ConvGeometry::same(0, 1, 1);
  EXPECT_EQ(band_error(2, x, [&](const Tensor& t) { return conv3d_rows(t, w, {}, g); }), 0.0);
}

TEST(Halo, GroupNormStatisticsCoverEveryRanksRows) {
  const Tensor x = random_tensor({2, 6, 1, 11, 5}, 4, -1.0f, 3.0f), w = random_tensor({6}, 5),
               b = random_tensor({6}, 6);
  for (int ranks : {2, 3, 4})
    // Sums in double in another order: the statistics agree to ~1e-15, the outputs to f32 rounding.
    EXPECT_LE(band_error(ranks, x, [&](const Tensor& t) { return group_norm_rows(t, 3, w, b, 1e-6f); }), 2e-6) << ranks;
}

TEST(Halo, ABandThinnerThanTheHaloIsRefused) {
  const Tensor x = random_tensor({1, 1, 1, 3, 4}, 7), w = random_tensor({1, 1, 1, 5, 1}, 8);
  kernels::ConvGeometry g;
  g.pad_before = {0, 2, 0};
  g.pad_after = {0, 2, 0};
  // 3 rows over 2 ranks: bands of 2 and 1 rows, and the halo needs 2.
  EXPECT_THROW(band_error(2, x, [&](const Tensor& t) { return conv3d_rows(t, w, {}, g); }), Error);
}

}  // namespace
}  // namespace cpdit::parallel
