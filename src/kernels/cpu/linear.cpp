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
#include <vector>

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

bool computes_in_bf16(const Weight& weight) {
  return !weight.is_quantised() && weight.dtype() == DType::bf16 && matmul_precision() == MatmulPrecision::bf16;
}

// y (m, n) = sum over the parts x_p (m, k_p) of x_p W_p^T (+ y when `accumulate`), where W_p are
// consecutive column ranges of the f32 weight w (n, k): each part's product reads its columns in
// place (row stride k), the later ones adding to what the earlier ones wrote.
void f32_products(const std::vector<Tensor>& parts, const float* w, int64_t k, int64_t m, int64_t n,
                  bool accumulate, float* y) {
  int64_t col = 0;
  for (const Tensor& x : parts) {
    const int64_t width = x.size(-1);
    // BLAS wants leading dimensions >= 1 even for k == 0.
    gemm(false, true, m, n, width, 1.0f, x.data<float>(), std::max<int64_t>(width, 1), w + col,
         std::max<int64_t>(k, 1), accumulate || col > 0 ? 1.0f : 0.0f, y, n);
    col += width;
  }
}

void run_linear(const detail::LinearArgs& a, Tensor& out) {
  if (a.weight.defined() && computes_in_bf16(a.weight)) {
    detail::bf16_matmul_into(a, out);
    return;
  }
  float* y = out.data<float>();
  // With an epilogue the sgemm writes y without reading it and the epilogue's pass adds the bias:
  // at LTX-Video's FFN (bench gemm, 1536x8192x2048, one thread) 0.257 CPU s against 0.276 with the
  // bias copied into y first, one pass over the widest tensor of the block fewer. The block
  // formats' products accumulate onto the copied bias.
  const bool bias_first = a.bias.defined() && (a.epilogue == Epilogue::none || a.blocks.defined());
  if (bias_first) broadcast_rows(a.bias.data<float>(), a.m, a.n, y);
  if (a.blocks.defined()) return detail::linear_quantised(a, bias_first ? 1.0f : 0.0f, y);
  f32_products({a.x}, widen_to_f32(a.weight).data<float>(), a.k, a.m, a.n, bias_first, y);
  detail::apply_epilogue(a, y, bias_first ? Tensor() : a.bias);
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

Tensor linear(const Tensor& x, const Weight& weight, const Tensor& bias, Epilogue epilogue) {
  detail::LinearArgs a = detail::linear_args(x, weight, bias, "linear", true);
  a.epilogue = epilogue;
  Tensor out = Tensor::empty(a.out_shape);
  run_linear(a, out);
  return out;
}

Tensor linear_cat(const std::vector<Tensor>& parts, const Weight& weight, const Tensor& bias) {
  constexpr const char* kKernel = "linear_cat";
  CPDIT_CHECK(!parts.empty(), invalid_argument, kKernel, ": no inputs");
  // The bf16 and block-quantised products take whole rows of x: they run on the concatenation.
  if (parts.size() == 1 || weight.is_quantised() || computes_in_bf16(weight))
    return linear(parts.size() == 1 ? parts[0] : cat(parts, -1), weight, bias);
  std::vector<Tensor> xs;
  int64_t k = 0;
  for (const Tensor& part : parts) {
    detail::check_min_dims(part, 1, kKernel, "input");
    const Tensor& first = parts[0];
    CPDIT_CHECK(part.dim() == first.dim() &&
                    std::equal(first.shape().begin(), first.shape().end() - 1, part.shape().begin()),
                invalid_argument, kKernel, ": input ", part.describe(), " does not match ", first.describe(),
                " in all but the last dim");
    xs.push_back(detail::f32_input(part, kKernel, "input"));
    k += part.size(-1);
  }
  CPDIT_CHECK(weight.defined() && weight.shape().size() == 2 && weight.shape()[1] == k, invalid_argument, kKernel,
              ": weight must be (out, ", k, ") for inputs of ", k, " features together, got ", weight.describe());
  const int64_t n = weight.shape()[0];
  Shape out_shape = xs[0].shape();
  out_shape.back() = 1;
  const int64_t m = shape_numel(out_shape);
  out_shape.back() = n;
  const Tensor b = detail::optional_vector(bias, n, kKernel, "bias");
  Tensor out = Tensor::empty(out_shape);
  if (b.defined()) broadcast_rows(b.data<float>(), m, n, out.data<float>());
  f32_products(xs, widen_to_f32(weight.values(kKernel).contiguous()).data<float>(), k, m, n, b.defined(),
               out.data<float>());
  return out;
}

}  // namespace cpdit::kernels
