#include "kernels/reference.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>

#include <gtest/gtest.h>

using namespace cpdit;
using cpdit::test::expect_close;
using cpdit::test::random_tensor;
using cpdit::test::to_double;

namespace {

// cos/sin tables as FLUX.1 and Wan build them: angle p * theta^(-2j/D) per pair, repeated for the
// pair (repeat_interleave), position p = s + 0.5 (non-integer ids are legal).
std::pair<Tensor, Tensor> tables(int64_t seq, int64_t d) {
  std::vector<float> c(size_t(seq * d)), s(size_t(seq * d));
  for (int64_t p = 0; p < seq; ++p)
    for (int64_t j = 0; j < d / 2; ++j) {
      double angle = (double(p) + 0.5) * std::pow(10000.0, -2.0 * double(j) / double(d));
      for (int64_t e : {2 * j, 2 * j + 1}) {
        c[size_t(p * d + e)] = float(std::cos(angle));
        s[size_t(p * d + e)] = float(std::sin(angle));
      }
    }
  return {Tensor::from_vector(c, {seq, d}), Tensor::from_vector(s, {seq, d})};
}

}  // namespace

TEST(Rope, RotatesAdjacentPairsAsComplexMultiplication) {
  const Shape shapes[] = {{2, 5, 3, 128}, {1, 1, 1, 2}, {3, 7, 5, 34}};
  uint32_t seed = 1;
  for (const Shape& shape : shapes) {
    SCOPED_TRACE(shape_string(shape));
    const int64_t B = shape[0], S = shape[1], H = shape[2], D = shape[3];
    Tensor x = random_tensor(shape, seed++);
    auto [cos, sin] = tables(S, D);
    auto xv = to_double(x), cv = to_double(cos), sv = to_double(sin);
    std::vector<double> want(xv.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t i = 0; i < D; i += 2) {
            // (x0 + i x1) * (cos + i sin): BFL's complex form of the same rotation.
            const size_t o = size_t(((b * S + s) * H + h) * D + i), t = size_t(s * D + i);
            want[o] = xv[o] * cv[t] - xv[o + 1] * sv[t];
            want[o + 1] = xv[o + 1] * cv[t] + xv[o] * sv[t];
          }
    expect_close(kernels::rope(x, cos, sin), want, 1e-6, 1e-6);
    // Wan's (1, S, 1, D) table shape is the same data.
    expect_close(kernels::rope(x, cos.reshape({1, S, 1, D}), sin.reshape({1, S, 1, D})), want, 1e-6, 1e-6);
  }
}

TEST(Rope, ZeroPositionIsTheIdentity) {
  Tensor x = random_tensor({1, 1, 2, 6}, 2);
  Tensor y = kernels::rope(x, Tensor::full({1, 6}, 1.0), Tensor::zeros({1, 6}));
  EXPECT_EQ(max_abs_diff(x, y), 0.0);
}

TEST(Rope, RejectsOddHeadDimAndWrongTables) {
  auto [cos, sin] = tables(4, 8);
  EXPECT_THROW(kernels::rope(random_tensor({1, 4, 2, 7}, 1), cos, sin), Error);
  EXPECT_THROW(kernels::rope(random_tensor({1, 5, 2, 8}, 1), cos, sin), Error);
  EXPECT_THROW(kernels::rope(random_tensor({4, 2, 8}, 1), cos, sin), Error);
}
