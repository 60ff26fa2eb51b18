#pragma once
// The error measures of the fixture comparisons, each the largest deviation relative to the size of
// the reference: float32 against float64 runs of the fixture models differ by ~2e-6 of it, the
// porting mistakes the fixtures' README lists by 1e-4 or more. A NaN anywhere is a NaN measure,
// which fails every `<` check.
#include <cpdit/core/tensor.hpp>

#include <algorithm>

namespace cpdit::testing {

// max |got - want| / max |want|
inline double relative_error(const Tensor& got, const Tensor& want) {
  return max_abs_diff(got, want) / max_abs_diff(want, Tensor::zeros(want.shape()));
}

// max |got - want| / (max(want) - min(want)): for outputs that sit away from zero (pixels, hidden
// states with a large mean), whose range is what a deviation is measured against.
inline double relative_to_range(const Tensor& got, const Tensor& want) {
  const Tensor w = want.to(DType::f32).contiguous();
  const auto [lo, hi] = std::minmax_element(w.data<float>(), w.data<float>() + w.numel());
  return max_abs_diff(got, want) / std::max(double(*hi) - double(*lo), 1e-30);
}

}  // namespace cpdit::testing
