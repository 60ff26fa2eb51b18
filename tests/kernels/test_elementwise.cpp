#include "kernels/reference.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>

#include <gtest/gtest.h>

using namespace cpdit;
using cpdit::test::expect_close;
using cpdit::test::random_tensor;
using cpdit::test::to_double;

namespace {

// op(a, b) with b broadcast by numpy's rule (b aligned right; dims of 1 repeat), in double.
std::vector<double> reference_broadcast(const Tensor& a, const Tensor& b, double (*op)(double, double)) {
  auto av = to_double(a), bv = to_double(b);
  const int nd = a.dim(), shift = a.dim() - b.dim();
  std::vector<double> out(av.size());
  for (size_t i = 0; i < av.size(); ++i) {
    int64_t rest = int64_t(i), offset = 0, stride = 1;
    for (int d = nd - 1; d >= 0; --d) {
      const int64_t index = rest % a.size(d);
      rest /= a.size(d);
      if (d >= shift) {
        const int64_t size = b.size(d - shift);
        offset += (size == 1 ? 0 : index) * stride;
        stride *= size;
      }
    }
    out[i] = op(av[i], bv[size_t(offset)]);
  }
  return out;
}

double plus(double x, double y) { return x + y; }
double times(double x, double y) { return x * y; }

const Shape kBroadcastable[] = {{2, 5, 33}, {5, 33}, {33}, {2, 1, 33}, {1, 5, 1}, {2, 5, 1}, {1}};

}  // namespace

TEST(Elementwise, AddAndMulBroadcastTheSecondOperand) {
  Tensor a = random_tensor({2, 5, 33}, 1);
  uint32_t seed = 2;
  for (const Shape& shape : kBroadcastable) {
    SCOPED_TRACE(shape_string(shape));
    Tensor b = random_tensor(shape, seed++);
    expect_close(kernels::add(a, b), reference_broadcast(a, b, plus), 1e-7);
    expect_close(kernels::mul(a, b), reference_broadcast(a, b, times), 1e-7);
    Tensor in_place = a.clone();
    kernels::add_(in_place, b);
    expect_close(in_place, reference_broadcast(a, b, plus), 1e-7);
  }
}

TEST(Elementwise, AddMulAccumulatesAGatedResidual) {
  Tensor a = random_tensor({2, 5, 33}, 10), b = random_tensor({2, 5, 33}, 11);
  uint32_t seed = 12;
  for (const Shape& shape : kBroadcastable) {
    SCOPED_TRACE(shape_string(shape));
    Tensor gate = random_tensor(shape, seed++);
    auto gated = reference_broadcast(b, gate, times);
    auto av = to_double(a);
    for (size_t i = 0; i < av.size(); ++i) av[i] += gated[i];
    Tensor x = a.clone();
    kernels::add_mul_(x, b, gate);
    expect_close(x, av, 1e-6, 1e-6);
  }
}

// y = x + (y + bias) gate in place of y, for every gate shape, without a gate, and without a bias.
TEST(Elementwise, BiasResidualFinishesABranchInPlace) {
  const Tensor x = random_tensor({2, 5, 33}, 20), product = random_tensor({2, 5, 33}, 21),
               bias = random_tensor({33}, 22);
  std::vector<Tensor> gates{Tensor()};
  uint32_t seed = 23;
  for (const Shape& shape : kBroadcastable) gates.push_back(random_tensor(shape, seed++));
  for (const Tensor& gate : gates)
    for (bool with_bias : {true, false}) {
      SCOPED_TRACE((gate.defined() ? shape_string(gate.shape()) : std::string("no gate")) +
                   (with_bias ? " with bias" : " without bias"));
      auto branch = to_double(product);
      const auto b = to_double(bias);
      if (with_bias)
        for (size_t i = 0; i < branch.size(); ++i) branch[i] += b[i % 33];
      const auto g = gate.defined() ? reference_broadcast(Tensor::full(x.shape(), 1.0), gate, times)
                                    : std::vector<double>(branch.size(), 1.0);
      const auto xv = to_double(x);
      std::vector<double> want(branch.size());
      for (size_t i = 0; i < want.size(); ++i) want[i] = xv[i] + branch[i] * g[i];
      Tensor y = product.clone();
      kernels::bias_residual_(y, x, with_bias ? bias : Tensor(), gate);
      // Three float32 roundings of O(1) values (bias sum, product, sum): a few ulp, absolute near 0.
      expect_close(y, want, 1e-6, 1e-6);
    }
}

TEST(Elementwise, RejectsShapesThatDoNotBroadcast) {
  Tensor a = random_tensor({2, 5, 33}, 1);
  EXPECT_THROW(kernels::add(a, random_tensor({2, 33}, 2)), Error);  // (B, C) needs a reshape to (B, 1, C)
  EXPECT_THROW(kernels::mul(a, random_tensor({1, 2, 5, 33}, 3)), Error);
  Tensor view = a.narrow(1, 0, 2);
  EXPECT_THROW(kernels::add_(view, random_tensor({33}, 4)), Error);
  EXPECT_THROW(kernels::add_mul_(a, random_tensor({2, 5, 1}, 5), random_tensor({33}, 6)), Error);
  EXPECT_THROW(kernels::bias_residual_(a, random_tensor({2, 5, 1}, 7), {}, {}), Error);     // x of another shape
  EXPECT_THROW(kernels::bias_residual_(a, a.clone(), random_tensor({32}, 8), {}), Error);  // bias of another width
  EXPECT_THROW(kernels::bias_residual_(view, random_tensor({2, 2, 33}, 9), {}, {}),
               Error);  // in place needs contiguous
}
