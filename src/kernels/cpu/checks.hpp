#pragma once
// Argument checks and small helpers shared by the CPU kernels (not part of the public API).
#include <cpdit/core/error.hpp>
#include <cpdit/core/tensor.hpp>

#include <cstdint>

namespace cpdit::kernels::detail {

// Below this many elements an OpenMP team costs more than it saves.
constexpr int64_t kParallelMin = 1 << 14;

// The f32, contiguous form of an input: the tensor itself, or a copy of a view.
inline Tensor f32_input(const Tensor& t, const char* kernel, const char* what) {
  CPDIT_CHECK(t.defined(), invalid_argument, kernel, ": ", what, " is undefined");
  CPDIT_CHECK(t.dtype() == DType::f32, invalid_argument, kernel, ": ", what, " must be f32, got ",
              t.describe(), " (convert it with .to(DType::f32))");
  return t.contiguous();
}

// An optional per-feature vector (norm weight/bias, linear bias): undefined, or `n` elements of f32,
// or of bf16 or f16 (a half-precision checkpoint's, as stored), which come back widened to f32.
inline Tensor optional_vector(const Tensor& t, int64_t n, const char* kernel, const char* what) {
  if (!t.defined()) return t;
  CPDIT_CHECK(t.numel() == n, invalid_argument, kernel, ": ", what, " ", t.describe(), " must have ",
              n, " elements (the last dim of the input)");
  const bool half = t.dtype() == DType::bf16 || t.dtype() == DType::f16;
  return f32_input(half ? t.to(DType::f32) : t, kernel, what);
}

inline void check_min_dims(const Tensor& t, int dims, const char* kernel, const char* what) {
  CPDIT_CHECK(t.dim() >= dims, invalid_argument, kernel, ": ", what, " ", t.describe(), " needs at least ",
              dims, " dims");
}

// row += bias, for the fused passes that finish a product run without its bias; no bias: nothing.
inline void add_bias(float* row, const float* bias, int64_t n) {
  if (!bias) return;
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) row[j] += bias[j];
}

}  // namespace cpdit::kernels::detail
