// A Linear on the same input on every rank, its output features shared out over 2-4 ranks and
// gathered: bit for bit the one-rank layer, for f32, bf16-compute (the few-token rows product and the
// AMX tiles) and Q8_0 weights, over widths that leave the last rank a partial run of features or
// none at all (70 features on 4 ranks: 64, 6, 0, 0).
#include "kernels/reference.hpp"
#include "parallel/bound_ranks.hpp"

#include <cpdit/core/precision.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/parallel/shared_linear.hpp>

#include <gtest/gtest.h>

namespace cpdit::parallel {
namespace {

using test::random_tensor;

// max |shared - whole| over every rank and element, with each rank's context bound (Ulysses).
double shared_error(int ranks, const Tensor& x, const Weight& w, const Tensor& b) {
  return test::worst_rank_error(ranks, ContextParallelConfig{1, ranks}, kernels::linear(x, w, b),
                                [&](comm::Communicator&) { return shared_linear(x, w, b); });
}

TEST(SharedLinear, EveryRankCountGivesTheOneRankLayerBitForBit) {
  for (int64_t n : {70, 200, 1000}) {
    const Tensor w = random_tensor({n, 96}, 2), b = random_tensor({n}, 3);
    for (int64_t tokens : {1, 2, 9}) {  // one sample's modulation, two (guidance), and past the rows product
      const Tensor x = random_tensor({tokens, 96}, 1);
      for (int ranks : {2, 3, 4}) {
        SCOPED_TRACE("n " + std::to_string(n) + " tokens " + std::to_string(tokens) + " ranks " +
                     std::to_string(ranks));
        EXPECT_EQ(shared_error(ranks, x, Weight(w), b), 0.0);
        const ScopedMatmulPrecision reduced(MatmulPrecision::bf16);
        EXPECT_EQ(shared_error(ranks, x, Weight(w.to(DType::bf16)), b), 0.0);
        if (tokens == 1) {
          const Weight q8 = kernels::quantise(random_tensor({n, 256}, 4), "Q8_0");
          EXPECT_EQ(shared_error(ranks, random_tensor({1, 256}, 8), q8, {}), 0.0);
        }
      }
    }
  }
}

TEST(SharedLinear, WithoutABoundGroupItIsTheLayer) {
  const Tensor x = random_tensor({2, 32}, 5), w = random_tensor({40, 32}, 6), b = random_tensor({40}, 7);
  EXPECT_EQ(test::to_double(shared_linear(x, Weight(w), b)), test::to_double(kernels::linear(x, Weight(w), b)));
}

}  // namespace
}  // namespace cpdit::parallel
