// The query/key tail of an attention layer, as one pass over the projection's output instead of
// three: the bias the product left out, the RMSNorm (across all heads, as Wan and LTX-Video put it,
// or per head, as FLUX.1 and Qwen-Image do), and the rotation. Each row is read once from memory and
// finished in L1.
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
  // A weight narrower than the row is one head's: the norm runs over each head on its own.
  const int64_t group = weight_in.defined() ? weight_in.numel() : c;
  CPDIT_CHECK(c == 0 || (group > 0 && c % group == 0), invalid_argument, kernel, ": a weight of ", group,
              " values fits neither the row of ", c, " nor a head of it");
  const Tensor weight = detail::optional_vector(weight_in, group, kernel, "weight");
  CPDIT_CHECK(cos_in.defined() == sin_in.defined(), invalid_argument, kernel, ": give both cos and sin, or neither");
  const bool rotate = cos_in.defined();
  int64_t width = c;  // of the tables: the whole row, or one head repeated across the row
  Tensor cos, sin;
  if (rotate) {
    width = cos_in.dim() >= 1 ? cos_in.size(-1) : 0;
    CPDIT_CHECK(width > 0 && width % 2 == 0 && c % width == 0, invalid_argument, kernel, ": tables of width ", width,
                " must be even and divide the row of ", c, " values");
    for (const Tensor* table : {&cos_in, &sin_in})
      CPDIT_CHECK(table->size(-1) == width && table->numel() == seq * width, invalid_argument, kernel,
                  ": cos/sin must hold (S, W) = (", seq, ", ", width, ") values, got ", table->describe());
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
    for (float* head = row; head < row + c; head += group) {
      const float rstd = detail::rms_rstd(head, group, eps);
#pragma omp simd
      for (int64_t j = 0; j < group; ++j) head[j] = w ? head[j] * rstd * w[j] : head[j] * rstd;
    }
    if (!rotate) continue;
    // The rotation of kernels::rope, term for term.
    const float* cs = cos.data<float>() + (r % seq) * width;
    const float* sn = sin.data<float>() + (r % seq) * width;
    for (float* part = row; part < row + c; part += width) {
#pragma omp simd
      for (int64_t i = 0; i < width; i += 2) {
        const float even = part[i], odd = part[i + 1];
        part[i] = even * cs[i] - odd * sn[i];
        part[i + 1] = odd * cs[i + 1] + even * sn[i + 1];
      }
    }
  }
}

}  // namespace cpdit::kernels
