// Linear layers: y = x W^T + b on the rows of x. f32 weights go through sgemm; bf16 weights through
// oneDNN's bf16 matmul, after rounding x to bf16 once.
#include "kernels/cpu/bf16_matmul.hpp"
#include "kernels/cpu/checks.hpp"

#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/cpu.hpp>

#include <algorithm>

namespace cpdit::kernels {

namespace {

// Copies the bias into every row of y, so that the GEMM can accumulate onto it (beta = 1): one write
// pass over y, cheaper than a separate read-modify-write pass after the GEMM (bench/gemm.cpp).
void broadcast_rows(const float* bias, int64_t rows, int64_t n, float* y) {
#pragma omp parallel for num_threads(compute_threads()) if (rows * n >= detail::kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    float* row = y + r * n;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) row[j] = bias[j];
  }
}

Tensor round_to_bf16(const Tensor& x) {
  Tensor out = Tensor::empty(x.shape(), DType::bf16);
  const float* src = x.data<float>();
  bf16* dst = out.data<bf16>();
  int64_t n = x.numel();
#pragma omp parallel for simd num_threads(compute_threads()) if (n >= detail::kParallelMin)
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
  return out;
}

Shape output_shape(const Tensor& x, const Tensor& weight) {
  Shape shape = x.shape();
  shape.back() = weight.size(0);
  return shape;
}

}  // namespace

void linear_into(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in, Tensor& out) {
  detail::check_min_dims(x_in, 1, "linear", "x");
  CPDIT_CHECK(weight_in.defined() && weight_in.dim() == 2, invalid_argument, "linear: weight must be (out, in), got ",
              weight_in.defined() ? weight_in.describe() : "undefined");
  CPDIT_CHECK(weight_in.dtype() == DType::f32 || weight_in.dtype() == DType::bf16, invalid_argument,
              "linear: weight must be f32 or bf16, got ", weight_in.describe());
  const int64_t k = x_in.size(-1), n = weight_in.size(0);
  CPDIT_CHECK(weight_in.size(1) == k, invalid_argument, "linear: x ", x_in.describe(), " has ", k,
              " features but weight ", weight_in.describe(), " expects ", weight_in.size(1));
  Tensor x = detail::f32_input(x_in, "linear", "x");
  Tensor bias = detail::optional_vector(bias_in, n, "linear", "bias");
  CPDIT_CHECK(out.defined() && out.dtype() == DType::f32 && out.is_contiguous() &&
                  out.shape() == output_shape(x, weight_in),
              invalid_argument, "linear_into: out must be contiguous f32 ", shape_string(output_shape(x, weight_in)),
              ", got ", out.defined() ? out.describe() : "undefined");
  CPDIT_CHECK(!out.same_storage(x), invalid_argument, "linear_into: out must not share storage with x");
  const int64_t m = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
  float* y = out.data<float>();
  const float* b = bias.defined() ? bias.data<float>() : nullptr;

  if (weight_in.dtype() == DType::bf16) {
    Tensor weight = weight_in.contiguous();
    detail::bf16_matmul(m, n, k, round_to_bf16(x).data<bf16>(), weight.data<bf16>(), b, y);
    return;
  }
  Tensor weight = weight_in.contiguous();
  if (b) broadcast_rows(b, m, n, y);
  const int64_t ld = std::max<int64_t>(k, 1);  // BLAS wants ld >= 1 even for k == 0
  gemm(false, true, m, n, k, 1.0f, x.data<float>(), ld, weight.data<float>(), ld, b ? 1.0f : 0.0f, y, n);
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  detail::check_min_dims(x, 1, "linear", "x");
  CPDIT_CHECK(weight.defined() && weight.dim() == 2, invalid_argument, "linear: weight must be (out, in), got ",
              weight.defined() ? weight.describe() : "undefined");
  Tensor out = Tensor::empty(output_shape(x, weight));
  linear_into(x, weight, bias, out);
  return out;
}

}  // namespace cpdit::kernels
