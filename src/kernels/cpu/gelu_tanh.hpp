#pragma once
// GELU's tanh form as one value's map, shared by the activation kernels (bias_gelu_, gelu) and the
// AMX Linear's fused epilogue, so that every path computes the same function. It uses
// 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)): one vectorised exp per element.
#include "kernels/cpu/exp_approx.hpp"

namespace cpdit::kernels::detail {

#pragma omp declare simd
inline float gelu_tanh_value(float v) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  const float u = kSqrt2OverPi * (v + 0.044715f * v * v * v);
  return v / (1.0f + exp_approx(-2.0f * u));
}

}  // namespace cpdit::kernels::detail
