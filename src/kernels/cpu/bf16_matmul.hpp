#pragma once
// y (m, n) f32 = x (m, k) bf16 times w (n, k) bf16 transposed, plus bias (n) f32 when not null,
// through oneDNN's matmul primitive (the C API of oneDNN 2.6 has no bf16 GEMM). Primitives are
// cached per shape; safe to call from several ranks' threads at once.
#include <cpdit/core/dtype.hpp>

#include <cstdint>

namespace cpdit::kernels::detail {

void bf16_matmul(int64_t m, int64_t n, int64_t k, const bf16* x, const bf16* w, const float* bias, float* y);

}  // namespace cpdit::kernels::detail
