#include "kernels/reference.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>

#include <gtest/gtest.h>

using namespace cpdit;
using cpdit::test::expect_close;
using cpdit::test::random_tensor;
using cpdit::test::to_double;

namespace {

const Shape kShapes[] = {{1, 1}, {3, 7}, {2, 5, 33}, {4, 257}, {1, 3, 2, 3072}};

// Reference LayerNorm / RMSNorm over the last dim; empty weight/bias vectors mean none.
std::vector<double> reference_norm(const Tensor& x, const std::vector<double>& w, const std::vector<double>& b,
                                   double eps, bool rms) {
  auto v = to_double(x);
  const size_t c = size_t(x.size(-1));
  for (size_t r = 0; r < v.size() / c; ++r) {
    double* row = v.data() + r * c;
    double mean = 0, var = 0;
    if (!rms)
      for (size_t j = 0; j < c; ++j) mean += row[j] / double(c);
    for (size_t j = 0; j < c; ++j) var += (row[j] - mean) * (row[j] - mean) / double(c);
    for (size_t j = 0; j < c; ++j) {
      row[j] = (row[j] - mean) / std::sqrt(var + eps);
      if (!w.empty()) row[j] *= w[j];
      if (!b.empty()) row[j] += b[j];
    }
  }
  return v;
}

}  // namespace

TEST(LayerNorm, MatchesDoubleReferenceWithAndWithoutAffine) {
  uint32_t seed = 1;
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(shape_string(shape));
    // An offset mean checks that the variance is computed about the mean, not as E[x^2] - mean^2.
    Tensor x = random_tensor(shape, seed++, 3.0f, 5.0f);
    const int64_t c = shape.back();
    Tensor w = random_tensor({c}, seed++), b = random_tensor({c}, seed++);
    const double eps = 1e-6;
    expect_close(kernels::layer_norm(x, {}, {}, float(eps)), reference_norm(x, {}, {}, eps, false), 1e-5, 1e-5);
    expect_close(kernels::layer_norm(x, w, b, float(eps)), reference_norm(x, to_double(w), to_double(b), eps, false),
                 1e-5, 1e-5);
  }
}

TEST(LayerNorm, EpsilonDominatesAConstantRow) {
  Tensor x = Tensor::full({2, 16}, 0.5);
  Tensor y = kernels::layer_norm(x, {}, {}, 1e-6f);
  expect_close(y, std::vector<double>(32, 0.0), 0.0, 0.0);
}

TEST(RmsNorm, MatchesDoubleReferenceWithAndWithoutWeight) {
  uint32_t seed = 20;
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(shape_string(shape));
    Tensor x = random_tensor(shape, seed++);
    Tensor w = random_tensor({shape.back()}, seed++);
    expect_close(kernels::rms_norm(x, {}, 1e-6f), reference_norm(x, {}, {}, 1e-6, true), 1e-5, 1e-6);
    expect_close(kernels::rms_norm(x, w, 1e-6f), reference_norm(x, to_double(w), {}, 1e-6, true), 1e-5, 1e-6);
  }
}

TEST(Norms, RejectWeightsOfTheWrongLength) {
  Tensor x = random_tensor({2, 8}, 1);
  EXPECT_THROW(kernels::layer_norm(x, random_tensor({7}, 2), {}, 1e-6f), Error);
  EXPECT_THROW(kernels::layer_norm(x, {}, random_tensor({9}, 3), 1e-6f), Error);
  EXPECT_THROW(kernels::rms_norm(x, random_tensor({4}, 4), 1e-6f), Error);
  EXPECT_THROW(kernels::rms_norm(x.to(DType::bf16), {}, 1e-6f), Error);
}
