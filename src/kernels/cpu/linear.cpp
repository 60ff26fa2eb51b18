// Linear layers, dispatched on the weight's format and the process's matmul precision. f32 weights,
// and every weight under exact_f32, run the f32 sgemm (bf16 and f16 widened exactly first). A bf16
// weight under MatmulPrecision::bf16 runs oneDNN's bf16 matmul, about twice the f32 sgemm's rate at
// one thread on this CPU (bench gemm). Block-quantised weights go to linear_quantised.cpp.
#include "kernels/cpu/linear_args.hpp"

#include <cpdit/core/precision.hpp>
#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/cpu.hpp>

#include <algorithm>
#include <type_traits>

namespace cpdit::kernels {

namespace {

// Copies the bias into every row of y, so that the GEMM accumulates onto it (beta = 1). Measured
// against a bias pass after the GEMM (bench/gemm.cpp): the same to within noise, and one loop fewer.
void broadcast_rows(const float* bias, int64_t rows, int64_t n, float* y) {
#pragma omp parallel for num_threads(compute_threads()) if (rows * n >= detail::kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    float* row = y + r * n;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) row[j] = bias[j];
  }
}

template <class Half>
void widen(const Half* src, float* dst, int64_t n) {
#pragma omp parallel for simd num_threads(compute_threads()) if (n >= detail::kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<Half, bf16>) dst[i] = bf16_to_f32(src[i]);
    else dst[i] = f16_to_f32(src[i]);
  }
}

Tensor widen_to_f32(const Tensor& weight) {
  if (weight.dtype() == DType::f32) return weight;
  Tensor out = Tensor::empty(weight.shape());
  if (weight.dtype() == DType::bf16) widen(weight.data<bf16>(), out.data<float>(), weight.numel());
  else widen(weight.data<f16>(), out.data<float>(), weight.numel());
  return out;
}

void run_linear(const detail::LinearArgs& a, Tensor& out) {
  if (a.weight.defined() && a.weight.dtype() == DType::bf16 && matmul_precision() == MatmulPrecision::bf16) {
    detail::bf16_matmul_into(a, out);
    return;
  }
  float* y = out.data<float>();
  const bool with_bias = a.bias.defined();
  if (with_bias) broadcast_rows(a.bias.data<float>(), a.m, a.n, y);
  if (a.blocks.defined()) return detail::linear_quantised(a, with_bias ? 1.0f : 0.0f, y);
  const int64_t ld = std::max<int64_t>(a.k, 1);  // BLAS wants ld >= 1 even for k == 0
  gemm(false, true, a.m, a.n, a.k, 1.0f, a.x.data<float>(), ld, widen_to_f32(a.weight).data<float>(), ld,
       with_bias ? 1.0f : 0.0f, y, a.n);
}

}  // namespace

void linear_into(const Tensor& x, const Weight& weight, const Tensor& bias, Tensor& out) {
  const detail::LinearArgs a = detail::linear_args(x, weight, bias, "linear", true);
  CPDIT_CHECK(out.defined() && out.dtype() == DType::f32 && out.is_contiguous() && out.shape() == a.out_shape,
              invalid_argument, "linear_into: out must be contiguous f32 ", shape_string(a.out_shape), ", got ",
              out.defined() ? out.describe() : "undefined");
  CPDIT_CHECK(!out.same_storage(a.x), invalid_argument, "linear_into: out must not share storage with x");
  run_linear(a, out);
}

Tensor linear(const Tensor& x, const Weight& weight, const Tensor& bias) {
  const detail::LinearArgs a = detail::linear_args(x, weight, bias, "linear", true);
  Tensor out = Tensor::empty(a.out_shape);
  run_linear(a, out);
  return out;
}

}  // namespace cpdit::kernels
