// AdaLN modulation, x (1 + scale) + shift, alone or fused with the affine-free LayerNorm or RMSNorm
// before it.
#include "kernels/cpu/checks.hpp"
#include "kernels/cpu/row_stats.hpp"

#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/cpu.hpp>

namespace cpdit::kernels {

namespace {

// The (scale, shift) rows for each token of x (B, S, C): one row per batch, or one per token.
struct Modulation {
  Tensor scale, shift;
  int64_t seq = 0;
  bool per_token = false;

  Modulation(const Tensor& x, const Tensor& scale_in, const Tensor& shift_in, const char* kernel) {
    CPDIT_CHECK(x.defined() && x.dim() == 3, invalid_argument, kernel, ": x must be (B, S, C), got ",
                x.defined() ? x.describe() : "undefined");
    const int64_t b = x.size(0), s = x.size(1), c = x.size(2);
    seq = s;
    for (const Tensor* t : {&scale_in, &shift_in}) {
      const bool per_batch = t->defined() && ((t->dim() == 2 && t->shape() == Shape{b, c}) ||
                                              (t->dim() == 3 && t->shape() == Shape{b, 1, c}));
      const bool token = t->defined() && t->shape() == Shape{b, s, c};
      CPDIT_CHECK(per_batch || token, invalid_argument, kernel,
                  ": scale/shift must be (B, C), (B, 1, C) or (B, S, C) = ", shape_string({b, s, c}), ", got ",
                  t->defined() ? t->describe() : "undefined");
    }
    CPDIT_CHECK(scale_in.numel() == shift_in.numel(), invalid_argument, kernel, ": scale ", scale_in.describe(),
                " and shift ", shift_in.describe(), " must be both per batch or both per token");
    per_token = scale_in.shape() == Shape{b, s, c} && s != 1;
    scale = detail::f32_input(scale_in, kernel, "scale");
    shift = detail::f32_input(shift_in, kernel, "shift");
  }
  // Row index into scale/shift for row r = batch * S + token of x.
  int64_t row(int64_t r) const { return per_token ? r : r / seq; }
};

enum class RowNorm { none, layer, rms };

template <RowNorm kNorm>
Tensor modulate_rows(const Tensor& x_in, const Tensor& scale_in, const Tensor& shift_in, float eps,
                     const char* kernel) {
  Modulation mod(x_in, scale_in, shift_in, kernel);
  Tensor x = detail::f32_input(x_in, kernel, "x");
  const int64_t c = x.size(2), rows = x.size(0) * x.size(1);
  Tensor out = Tensor::empty(x.shape());
  const float* src = x.data<float>();
  const float* scale = mod.scale.data<float>();
  const float* shift = mod.shift.data<float>();
  float* dst = out.data<float>();
#pragma omp parallel for num_threads(compute_threads()) if (x.numel() >= detail::kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = src + r * c;
    const float* sc = scale + mod.row(r) * c;
    const float* sh = shift + mod.row(r) * c;
    float* o = dst + r * c;
    if constexpr (kNorm == RowNorm::rms) {
      // rms_norm's in·rstd, then modulate's arithmetic, term for term.
      const float rstd = detail::rms_rstd(in, c, eps);
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) o[j] = in[j] * rstd * (1.0f + sc[j]) + sh[j];
      continue;
    }
    detail::MeanRstd stats{0.0f, 1.0f};
    if constexpr (kNorm == RowNorm::layer) stats = detail::mean_rstd(in, c, eps);
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) o[j] = (in[j] - stats.mean) * stats.rstd * (1.0f + sc[j]) + sh[j];
  }
  return out;
}

}  // namespace

Tensor modulate(const Tensor& x, const Tensor& scale, const Tensor& shift) {
  return modulate_rows<RowNorm::none>(x, scale, shift, 0.0f, "modulate");
}

Tensor layer_norm_modulate(const Tensor& x, const Tensor& scale, const Tensor& shift, float eps) {
  return modulate_rows<RowNorm::layer>(x, scale, shift, eps, "layer_norm_modulate");
}

Tensor rms_norm_modulate(const Tensor& x, const Tensor& scale, const Tensor& shift, float eps) {
  return modulate_rows<RowNorm::rms>(x, scale, shift, eps, "rms_norm_modulate");
}

}  // namespace cpdit::kernels
