#pragma once
// Whether a result holds only finite numbers: what a run checks before it calls its output good (the
// denoising loop after each step, `cpdit forward` before it writes).
#include <cpdit/core/tensor.hpp>

namespace cpdit::pipeline {

// True when every element of `t` (any float dtype, any strides; integer and bool tensors always) is finite.
bool all_finite(const Tensor& t);

}  // namespace cpdit::pipeline
