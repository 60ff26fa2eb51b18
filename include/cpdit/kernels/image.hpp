#pragma once
// CPU kernels on channel-first images and videos, (B, C, H, W) or (B, C, F, H, W): the arithmetic of
// the VAE decoders. Same conventions as cpu.hpp: f32 inputs (views are made contiguous), an OpenMP
// team of compute_threads(), new contiguous f32 results, cpdit::Error(invalid_argument) on a wrong
// shape.
#include <cpdit/core/tensor.hpp>

#include <array>
#include <cstdint>
#include <vector>

namespace cpdit::kernels {

// ---- Convolution ---------------------------------------------------------------------------------

// Stride and zero padding per dim, in (frames, rows, columns) order. Padding is given per side: a
// causal time convolution pads frames only before, a row shard of a parallel decode pads only the
// image's own edges, and the encoder's downsampling pads only after.
struct ConvGeometry {
  std::array<int64_t, 3> stride{1, 1, 1};
  std::array<int64_t, 3> pad_before{0, 0, 0};
  std::array<int64_t, 3> pad_after{0, 0, 0};
  static ConvGeometry same(int64_t frames, int64_t rows, int64_t cols) {  // symmetric "padding=k//2"
    return {{1, 1, 1}, {frames, rows, cols}, {frames, rows, cols}};
  }
};

// How conv3d sums: `fastest` picks per call by the measured rule in conv.cpp (Winograd F(4x4, 3x3) on
// wide 3x3 layers of at least 128x128 output pixels, direct elsewhere); `direct` and `winograd` force
// one (a bench or a test of that path; `winograd` fails on a layer oneDNN cannot run so).
enum class ConvAlgorithm { fastest, direct, winograd };
// Whether oneDNN runs Winograd at all on this CPU (its Winograd needs AVX-512; on AVX2 alone `fastest`
// always sums directly and `winograd` fails).
bool winograd_available();
// The algorithm conv3d uses where the caller names none (the models): `fastest` unless set, process-
// wide as the matmul precision is. `direct` sums as PyTorch's CPU convolution does
// (`bench vae --conv direct` measures what Winograd changes).
void set_default_conv_algorithm(ConvAlgorithm algorithm);
// What `algorithm` stands for on x (B, C, F, H, W) convolved by weight (O, C, kf, kh, kw): itself
// unless `fastest`, which is Winograd on wide 3x3 layers of at least 128x128 output pixels and direct
// elsewhere. `out_rows` is the layer's whole output height: under a row split every rank's band
// together (parallel::conv3d_rows), so that a layer sums the same way on any number of ranks.
ConvAlgorithm resolve_conv_algorithm(ConvAlgorithm algorithm, const Shape& x_shape, const Shape& weight_shape,
                                     const ConvGeometry& geometry, int64_t out_rows);
ConvAlgorithm default_conv_algorithm();

// While one lives on any thread, conv3d keeps the Winograd-transformed weights it makes, for every
// thread of the process: a decoder holds one over its decode, so that each layer's weights are
// transformed once per decode, not once per call (Wan decodes frame by frame) nor once per rank
// (ranks as threads share the weights). When the last one ends, the kept weights are freed.
// A kept transform runs on the compute threads of all the scopes' threads together (the local ranks
// decoding, which wait for it); its bytes do not depend on how many threads make it.
class ConvWeightScope {
 public:
  ConvWeightScope();
  ~ConvWeightScope();
  ConvWeightScope(const ConvWeightScope&) = delete;
  ConvWeightScope& operator=(const ConvWeightScope&) = delete;

 private:
  int threads_;  // the compute threads this scope lends to the kept transforms
};

// What Winograd's weight transforms have cost this process so far (wall seconds inside them, kept
// or not), and the thread budget the latest one ran with: `bench vae` prints their share of a decode.
struct WeightTransformStats {
  int64_t transforms = 0;
  double seconds = 0;
  int last_threads = 0;
};
WeightTransformStats weight_transform_stats();

// x (B, C, F, H, W), weight (O, C, kf, kh, kw), bias (O) or undefined -> (B, O, F', H', W') with
// F' = (F + pads - kf) / stride + 1 (likewise H', W'). oneDNN's convolution primitive in its own
// layout, reordering in and out per call (chosen by measurement; see bench/README.md).
// A 2-D convolution is the case of one frame, or of a kernel one frame deep applied to every frame:
// x (B, C, 1, H, W) or (B, C, F, H, W), weight (O, C, 1, kh, kw).
Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvGeometry& geometry,
              ConvAlgorithm algorithm = default_conv_algorithm());
// conv3d on the rows of `parts` (each (B, C, F, H_i, W)) stacked in order, without first copying
// them together: each is laid out straight into its place in the convolution's own layout (a
// row-split band and the halo rows around it).
Tensor conv3d_row_parts(const std::vector<Tensor>& parts, const Tensor& weight, const Tensor& bias,
                        const ConvGeometry& geometry, ConvAlgorithm algorithm = default_conv_algorithm());

// ---- Normalisation over channels ------------------------------------------------------------------

// GroupNorm split in two so that a row-sharded image can all-reduce its statistics in between:
// group_moments returns, per (batch, group), the sum of x and the sum of x^2 in double (interleaved:
// [(b*G + g)*2] = sum, [+1] = sum of squares) and the element count per group; group_norm_apply
// normalises with moments covering `count` elements (the whole image's when sharded).
struct GroupMoments {
  std::vector<double> sums;
  int64_t count = 0;  // elements per (batch, group)
};
GroupMoments group_moments(const Tensor& x, int64_t groups);
Tensor group_norm_apply(const Tensor& x, int64_t groups, const GroupMoments& moments, const Tensor& weight,
                        const Tensor& bias, float eps);
// x (B, C, ...) -> (x - mean_g) / sqrt(var_g + eps) * weight[c] + bias[c], over each group of C/G
// channels and every position; weight and bias (C) f32 or undefined.
Tensor group_norm(const Tensor& x, int64_t groups, const Tensor& weight, const Tensor& bias, float eps);

// Wan's RMS_norm over the channels at each position: x / max(||x[:, pos]||_2, 1e-12) * sqrt(C) *
// gamma[c] (PyTorch's F.normalize, so a zero vector stays zero). x (B, C, ...), gamma C elements.
Tensor channel_rms_norm(const Tensor& x, const Tensor& gamma);
// LTX-Video's RMSNorm over channels without a weight: x / sqrt(mean over C of x^2 + eps).
Tensor channel_rms_norm_eps(const Tensor& x, float eps);

// ---- Resampling ----------------------------------------------------------------------------------

// Nearest-neighbour x2 on the last two dims (rows, columns): (..., H, W) -> (..., 2H, 2W). PyTorch's
// "nearest" and "nearest-exact" agree at factor 2.
Tensor upsample_nearest2x(const Tensor& x);

// min(max(x, lo), hi) elementwise.
Tensor clamp(const Tensor& x, float lo, float hi);

}  // namespace cpdit::kernels
