// Convolution as im2col + sgemm. Output rows are produced in bands: for one output frame and a band
// of output rows, the input patches are gathered into a (C*kf*kh*kw, rows*W') column matrix (zeros
// where the window leaves the padded input), and one sgemm multiplies the (O, C*kf*kh*kw) weight by
// it, writing straight into the output. Bands keep the column matrix near a few MiB, so it stays in
// cache-friendly reach and its memory is small beside the activations. A 1x1x1 convolution without
// stride or padding is already a GEMM on the input and skips the gather.
#include "kernels/cpu/checks.hpp"

#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/kernels/image.hpp>

#include <algorithm>
#include <cstring>

namespace cpdit::kernels {
namespace {

// About 8 MiB of f32 per column matrix.
constexpr int64_t kBandElements = int64_t(2) << 20;

struct Dims {
  int64_t batch, channels, frames, height, width;
  int64_t out_channels, kf, kh, kw;
  int64_t out_frames, out_height, out_width;
};

int64_t out_size(int64_t in, int64_t kernel, int64_t stride, int64_t before, int64_t after, const char* what,
                 const Tensor& x) {
  const int64_t padded = in + before + after;
  CPDIT_CHECK(stride > 0 && before >= 0 && after >= 0, invalid_argument, "conv: ", what,
              " stride must be positive and padding non-negative");
  CPDIT_CHECK(padded >= kernel, invalid_argument, "conv: input ", x.describe(), " is smaller in ", what,
              " (", padded, " with padding) than the kernel (", kernel, ")");
  return (padded - kernel) / stride + 1;
}

// Fills col (K, rows*Wo) for output frame `of` and output rows [r0, r0 + rows) of batch item b.
void gather(const float* x, const Dims& d, const ConvGeometry& g, int64_t b, int64_t of, int64_t r0, int64_t rows,
            float* col) {
  const int64_t k_total = d.channels * d.kf * d.kh * d.kw, n = rows * d.out_width;
#pragma omp parallel for num_threads(compute_threads()) if (k_total * n >= detail::kParallelMin)
  for (int64_t k = 0; k < k_total; ++k) {
    const int64_t l = k % d.kw, j = k / d.kw % d.kh, i = k / (d.kw * d.kh) % d.kf, c = k / (d.kw * d.kh * d.kf);
    float* dst = col + k * n;
    const int64_t f = of * g.stride[0] + i - g.pad_before[0];
    if (f < 0 || f >= d.frames) {
      std::memset(dst, 0, size_t(n) * sizeof(float));
      continue;
    }
    const float* plane = x + ((b * d.channels + c) * d.frames + f) * d.height * d.width;
    for (int64_t r = 0; r < rows; ++r) {
      float* out = dst + r * d.out_width;
      const int64_t y = (r0 + r) * g.stride[1] + j - g.pad_before[1];
      if (y < 0 || y >= d.height) {
        std::memset(out, 0, size_t(d.out_width) * sizeof(float));
        continue;
      }
      const float* in = plane + y * d.width;
      const int64_t shift = l - g.pad_before[2];
      if (g.stride[2] == 1) {
        // Columns whose source lies inside the row: [lo, hi).
        const int64_t lo = std::clamp<int64_t>(-shift, 0, d.out_width);
        const int64_t hi = std::clamp<int64_t>(d.width - shift, lo, d.out_width);
        std::fill(out, out + lo, 0.0f);
        std::memcpy(out + lo, in + lo + shift, size_t(hi - lo) * sizeof(float));
        std::fill(out + hi, out + d.out_width, 0.0f);
      } else {
        for (int64_t w = 0; w < d.out_width; ++w) {
          const int64_t xw = w * g.stride[2] + shift;
          out[w] = xw >= 0 && xw < d.width ? in[xw] : 0.0f;
        }
      }
    }
  }
}

}  // namespace

Tensor conv3d(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in, const ConvGeometry& g) {
  CPDIT_CHECK(x_in.defined() && x_in.dim() == 5, invalid_argument, "conv3d: x must be (B, C, F, H, W), got ",
              x_in.defined() ? x_in.describe() : "undefined");
  CPDIT_CHECK(weight_in.defined() && weight_in.dim() == 5 && weight_in.size(1) == x_in.size(1), invalid_argument,
              "conv3d: weight must be (O, ", x_in.size(1), ", kf, kh, kw), got ",
              weight_in.defined() ? weight_in.describe() : "undefined");
  Tensor x = detail::f32_input(x_in, "conv3d", "x");
  Tensor weight = detail::f32_input(weight_in, "conv3d", "weight");
  Tensor bias = detail::optional_vector(bias_in, weight.size(0), "conv3d", "bias");
  Dims d{x.size(0), x.size(1), x.size(2), x.size(3), x.size(4), weight.size(0), weight.size(2), weight.size(3),
         weight.size(4), 0, 0, 0};
  d.out_frames = out_size(d.frames, d.kf, g.stride[0], g.pad_before[0], g.pad_after[0], "frames", x);
  d.out_height = out_size(d.height, d.kh, g.stride[1], g.pad_before[1], g.pad_after[1], "rows", x);
  d.out_width = out_size(d.width, d.kw, g.stride[2], g.pad_before[2], g.pad_after[2], "columns", x);

  Tensor out = Tensor::empty({d.batch, d.out_channels, d.out_frames, d.out_height, d.out_width});
  const int64_t k_total = d.channels * d.kf * d.kh * d.kw;
  const int64_t out_plane = d.out_height * d.out_width, out_volume = d.out_frames * out_plane;
  const float* w = weight.data<float>();
  float* o = out.data<float>();
  if (out.numel() == 0) return out;

  const bool pointwise = d.kf == 1 && d.kh == 1 && d.kw == 1 && g.stride == std::array<int64_t, 3>{1, 1, 1} &&
                         g.pad_before == std::array<int64_t, 3>{0, 0, 0} &&
                         g.pad_after == std::array<int64_t, 3>{0, 0, 0};
  if (pointwise) {
    for (int64_t b = 0; b < d.batch; ++b)
      gemm(false, false, d.out_channels, out_volume, k_total, 1.0f, w, k_total,
           x.data<float>() + b * d.channels * out_volume, out_volume, 0.0f, o + b * d.out_channels * out_volume,
           out_volume);
  } else {
    const int64_t band_rows = std::clamp<int64_t>(kBandElements / std::max<int64_t>(1, k_total * d.out_width), 1,
                                                  d.out_height);
    Tensor col = Tensor::empty({k_total, band_rows * d.out_width});
    for (int64_t b = 0; b < d.batch; ++b)
      for (int64_t of = 0; of < d.out_frames; ++of)
        for (int64_t r0 = 0; r0 < d.out_height; r0 += band_rows) {
          const int64_t rows = std::min(band_rows, d.out_height - r0), n = rows * d.out_width;
          gather(x.data<float>(), d, g, b, of, r0, rows, col.data<float>());
          float* dst = o + b * d.out_channels * out_volume + of * out_plane + r0 * d.out_width;
          gemm(false, false, d.out_channels, n, k_total, 1.0f, w, k_total, col.data<float>(), n, 0.0f, dst,
               out_volume);
        }
  }
  if (bias.defined()) {
    const float* bv = bias.data<float>();
    const int64_t planes = d.batch * d.out_channels;
#pragma omp parallel for num_threads(compute_threads()) if (out.numel() >= detail::kParallelMin)
    for (int64_t p = 0; p < planes; ++p) {
      float* dst = o + p * out_volume;
      const float add = bv[p % d.out_channels];
#pragma omp simd
      for (int64_t i = 0; i < out_volume; ++i) dst[i] += add;
    }
  }
  return out;
}

}  // namespace cpdit::kernels
