// The query/key tail of an attention layer whose RMSNorm spans all heads (Wan, LTX-Video), as one
// pass over the projection's output instead of three: the bias the product left out, the norm, and
// (LTX-Video) the rotation over the whole row. Each row is read once from memory and finished in L1.
#include "kernels/cpu/checks.hpp"
#include "kernels/cpu/row_stats.hpp"

#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/cpu.hpp>

namespace cpdit::kernels {

void bias_rms_norm_rope_(Tensor& x, const Tensor& bias_in, const Tensor& weight_in, float eps, const Tensor& cos_in,
                         const Tensor& sin_in) {
  const char* kernel = "bias_rms_norm_rope_";
  CPDIT_CHECK(x.defined() && x.dim() == 3 && x.dtype() == DType::f32 && x.is_contiguous(), invalid_argument, kernel,
              ": x must be contiguous f32 (B, S, C), got ", x.defined() ? x.describe() : "undefined");
  const int64_t seq = x.size(1), c = x.size(2), rows = x.size(0) * seq;
  const Tensor bias = detail::optional_vector(bias_in, c, kernel, "bias");
  const Tensor weight = detail::optional_vector(weight_in, c, kernel, "weight");
  CPDIT_CHECK(cos_in.defined() == sin_in.defined(), invalid_argument, kernel, ": give both cos and sin, or neither");
  const bool rotate = cos_in.defined();
  Tensor cos, sin;
  if (rotate) {
    CPDIT_CHECK(c % 2 == 0, invalid_argument, kernel, ": rotating a row of ", c, " values needs pairs");
    for (const Tensor* table : {&cos_in, &sin_in})
      CPDIT_CHECK(table->dim() >= 1 && table->size(-1) == c && table->numel() == seq * c, invalid_argument, kernel,
                  ": cos/sin must hold (S, C) = (", seq, ", ", c, ") values, got ", table->describe());
    cos = detail::f32_input(cos_in, kernel, "cos");
    sin = detail::f32_input(sin_in, kernel, "sin");
  }
  float* data = x.data<float>();
  const float* b = bias.defined() ? bias.data<float>() : nullptr;
  const float* w = weight.defined() ? weight.data<float>() : nullptr;
#pragma omp parallel for num_threads(compute_threads()) if (x.numel() >= detail::kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    float* row = data + r * c;
    detail::add_bias(row, b, c);
    const float rstd = detail::rms_rstd(row, c, eps);
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) row[j] = w ? row[j] * rstd * w[j] : row[j] * rstd;
    if (!rotate) continue;
    // The rotation of kernels::rope, term for term.
    const float* cs = cos.data<float>() + (r % seq) * c;
    const float* sn = sin.data<float>() + (r % seq) * c;
#pragma omp simd
    for (int64_t i = 0; i < c; i += 2) {
      const float even = row[i], odd = row[i + 1];
      row[i] = even * cs[i] - odd * sn[i];
      row[i + 1] = odd * cs[i + 1] + even * sn[i + 1];
    }
  }
}

}  // namespace cpdit::kernels
