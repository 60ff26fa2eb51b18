// GroupNorm over channel-first tensors. Statistics are sums in double (a group of a 1024x1024 image
// holds millions of values; an f32 running sum would lose digits), kept as plain sums so a
// row-sharded image can add its ranks' sums before normalising.
#include "kernels/cpu/checks.hpp"

#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/image.hpp>

#include <cmath>

namespace cpdit::kernels {
namespace {

struct Layout {
  int64_t batch, channels, positions, per_group;  // per_group = channels per group
};

Layout layout_of(const Tensor& x, int64_t groups, const char* kernel) {
  CPDIT_CHECK(x.defined() && x.dim() >= 2, invalid_argument, kernel, ": x must be (B, C, ...), got ",
              x.defined() ? x.describe() : "undefined");
  const int64_t channels = x.size(1);
  CPDIT_CHECK(groups > 0 && channels % groups == 0, invalid_argument, kernel, ": ", channels,
              " channels do not split into ", groups, " groups");
  const int64_t positions = channels == 0 || x.size(0) == 0 ? 0 : x.numel() / (x.size(0) * channels);
  return {x.size(0), channels, positions, channels / groups};
}

}  // namespace

GroupMoments group_moments(const Tensor& x_in, int64_t groups) {
  const Layout l = layout_of(x_in, groups, "group_moments");
  Tensor x = detail::f32_input(x_in, "group_moments", "x");
  GroupMoments m{std::vector<double>(size_t(l.batch * groups * 2), 0.0), l.per_group * l.positions};
  const float* src = x.data<float>();
  // One channel plane per iteration, summed into its group afterwards: parallel over B*C planes.
  std::vector<double> plane_sums(size_t(l.batch * l.channels * 2));
#pragma omp parallel for num_threads(compute_threads()) if (x.numel() >= detail::kParallelMin)
  for (int64_t p = 0; p < l.batch * l.channels; ++p) {
    const float* in = src + p * l.positions;
    double sum = 0.0, squares = 0.0;
#pragma omp simd reduction(+ : sum, squares)
    for (int64_t i = 0; i < l.positions; ++i) {
      sum += in[i];
      squares += double(in[i]) * in[i];
    }
    plane_sums[size_t(2 * p)] = sum;
    plane_sums[size_t(2 * p + 1)] = squares;
  }
  for (int64_t p = 0; p < l.batch * l.channels; ++p) {
    const int64_t bg = p / l.channels * groups + p % l.channels / l.per_group;
    m.sums[size_t(2 * bg)] += plane_sums[size_t(2 * p)];
    m.sums[size_t(2 * bg + 1)] += plane_sums[size_t(2 * p + 1)];
  }
  return m;
}

Tensor group_norm_apply(const Tensor& x_in, int64_t groups, const GroupMoments& m, const Tensor& weight_in,
                        const Tensor& bias_in, float eps) {
  const Layout l = layout_of(x_in, groups, "group_norm");
  CPDIT_CHECK(m.sums.size() == size_t(l.batch * groups * 2) && m.count > 0, invalid_argument,
              "group_norm: moments of ", m.sums.size() / 2, " groups over ", m.count, " elements do not fit ",
              x_in.describe(), " in ", groups, " groups");
  Tensor x = detail::f32_input(x_in, "group_norm", "x");
  Tensor weight = detail::optional_vector(weight_in, l.channels, "group_norm", "weight");
  Tensor bias = detail::optional_vector(bias_in, l.channels, "group_norm", "bias");
  Tensor out = Tensor::empty(x.shape());
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  const float* w = weight.defined() ? weight.data<float>() : nullptr;
  const float* b = bias.defined() ? bias.data<float>() : nullptr;
#pragma omp parallel for num_threads(compute_threads()) if (x.numel() >= detail::kParallelMin)
  for (int64_t p = 0; p < l.batch * l.channels; ++p) {
    const int64_t c = p % l.channels, bg = p / l.channels * groups + c / l.per_group;
    const double mean = m.sums[size_t(2 * bg)] / double(m.count);
    // E[x^2] - mean^2 in double: the cancellation costs ~1e-16 relative, far below f32 rounding.
    const double var = std::max(0.0, m.sums[size_t(2 * bg + 1)] / double(m.count) - mean * mean);
    const double rstd = 1.0 / std::sqrt(var + double(eps));
    // (x - mean) * scale + bias, the mean subtracted first and in two f32 parts (its rounding and
    // the remainder): a large mean then cancels exactly, where x * scale + a folded shift loses
    // ulp(mean * scale) unless the compiler fuses the multiply-add.
    const float mean_hi = float(mean), mean_lo = float(mean - double(mean_hi));
    const float scale = float(rstd * (w ? w[c] : 1.0f));
    const float shift = b ? b[c] : 0.0f;
    const float* in = src + p * l.positions;
    float* o = dst + p * l.positions;
#pragma omp simd
    for (int64_t i = 0; i < l.positions; ++i) o[i] = ((in[i] - mean_hi) - mean_lo) * scale + shift;
  }
  return out;
}

Tensor group_norm(const Tensor& x, int64_t groups, const Tensor& weight, const Tensor& bias, float eps) {
  return group_norm_apply(x, groups, group_moments(x, groups), weight, bias, eps);
}

}  // namespace cpdit::kernels
