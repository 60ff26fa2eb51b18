#pragma once
// The error measure of the fixture comparisons: max |got - want| / max |want|, the largest deviation
// relative to the range of the reference (float32 against float64 runs of the fixture models differ
// by ~2e-6 of it).
#include <cpdit/core/tensor.hpp>

namespace cpdit::testing {

inline double relative_error(const Tensor& got, const Tensor& want) {
  return max_abs_diff(got, want) / max_abs_diff(want, Tensor::zeros(want.shape()));
}

}  // namespace cpdit::testing
