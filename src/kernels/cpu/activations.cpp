// Pointwise activations. The tanh GELU uses 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)), so it, SiLU and
// the quick GELU reduce to one vectorised exp per element.
#include "kernels/cpu/checks.hpp"
#include "kernels/cpu/exp_approx.hpp"
#include "kernels/cpu/gelu_tanh.hpp"

#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/cpu.hpp>

#include <cmath>

namespace cpdit::kernels {

namespace {

template <class Fn>
Tensor pointwise(const Tensor& x_in, const char* kernel, Fn fn) {
  Tensor x = detail::f32_input(x_in, kernel, "x");
  Tensor out = Tensor::empty(x.shape());
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  const int64_t n = x.numel();
#pragma omp parallel for simd num_threads(compute_threads()) if (n >= detail::kParallelMin)
  for (int64_t i = 0; i < n; ++i) dst[i] = fn(src[i]);
  return out;
}

// The exact (erf) GELU as one value's map; the tanh form is gelu_tanh.hpp's. The exact form only
// serves Wan's small image embedder; std::erf does not vectorise.
float gelu_erf_value(float v) { return 0.5f * v * (1.0f + std::erf(v * 0.7071067811865476f)); }

}  // namespace

Tensor gelu(const Tensor& x, bool tanh_approx) {
  if (tanh_approx) return pointwise(x, "gelu", [](float v) { return detail::gelu_tanh_value(v); });
  return pointwise(x, "gelu", [](float v) { return gelu_erf_value(v); });
}

void bias_gelu_(Tensor& x, const Tensor& bias_in, bool tanh_approx) {
  CPDIT_CHECK(x.defined() && x.dim() >= 1 && x.dtype() == DType::f32 && x.is_contiguous(), invalid_argument,
              "bias_gelu_: x must be contiguous f32, got ", x.defined() ? x.describe() : "undefined");
  const int64_t c = x.size(-1), rows = c == 0 ? 0 : x.numel() / c;
  const Tensor bias = detail::optional_vector(bias_in, c, "bias_gelu_", "bias");
  const float* b = bias.defined() ? bias.data<float>() : nullptr;
  float* data = x.data<float>();
#pragma omp parallel for num_threads(compute_threads()) if (x.numel() >= detail::kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    float* row = data + r * c;
    detail::add_bias(row, b, c);
    if (tanh_approx) {
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) row[j] = detail::gelu_tanh_value(row[j]);
    } else {
      for (int64_t j = 0; j < c; ++j) row[j] = gelu_erf_value(row[j]);
    }
  }
}

Tensor silu(const Tensor& x) {
  return pointwise(x, "silu", [](float v) { return v / (1.0f + detail::exp_approx(-v)); });
}

Tensor quick_gelu(const Tensor& x) {
  return pointwise(x, "quick_gelu", [](float v) { return v / (1.0f + detail::exp_approx(-1.702f * v)); });
}

}  // namespace cpdit::kernels
