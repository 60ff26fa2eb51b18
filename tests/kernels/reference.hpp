#pragma once
// Helpers for the kernel tests: seeded random tensors and a comparison against double-precision
// references computed in the tests themselves.
#include <cpdit/core/tensor.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace cpdit::test {

inline Tensor random_tensor(const Shape& shape, uint32_t seed, float lo = -2.0f, float hi = 2.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(size_t(shape_numel(shape)));
  for (float& x : v) x = dist(gen);
  return Tensor::from_vector(v, shape);
}

inline std::vector<double> to_double(const Tensor& t) {
  Tensor c = t.to(DType::f32);
  const float* p = c.data<float>();
  return std::vector<double>(p, p + c.numel());
}

// Every element within bound[i] of the reference; reports the worst element.
inline void expect_within(const Tensor& got, const std::vector<double>& ref, const std::vector<double>& bound) {
  ASSERT_EQ(size_t(got.numel()), ref.size()) << got.describe();
  ASSERT_EQ(bound.size(), ref.size());
  const float* p = got.data<float>();
  int64_t worst = -1;
  double worst_excess = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double excess = std::abs(double(p[i]) - ref[i]) - bound[i];
    if (!(excess <= worst_excess)) {  // also catches NaN
      worst_excess = excess;
      worst = int64_t(i);
    }
  }
  if (worst >= 0)
    ADD_FAILURE() << "element " << worst << " of " << got.describe() << ": got " << p[worst] << ", want "
                  << ref[size_t(worst)] << " within " << bound[size_t(worst)];
}

// Every element within rtol * |ref| + atol of the reference.
inline void expect_close(const Tensor& got, const std::vector<double>& ref, double rtol, double atol = 0.0) {
  std::vector<double> bound(ref.size());
  for (size_t i = 0; i < ref.size(); ++i) bound[i] = rtol * std::abs(ref[i]) + atol;
  expect_within(got, ref, bound);
}

inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

}  // namespace cpdit::test
