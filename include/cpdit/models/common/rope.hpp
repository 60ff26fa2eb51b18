#pragma once
// Rotary position tables of the DiT families. Every builder returns the layout kernels::rope applies:
// cos and sin, each (S, D), value j of a token repeated for its adjacent pair (2j, 2j+1) — which is
// also the complex (polar) form, rotation by cos + i·sin of each pair. Angles and roundings follow
// the family's own code, since the fixtures check them to the last bits.
#include <cpdit/core/tensor.hpp>

#include <array>
#include <optional>
#include <vector>

namespace cpdit::models::common {

struct RopeTables {
  Tensor cos, sin;  // (S, D)
};

// FLUX.1 (FluxPosEmbed): ids (N, axes) of any real positions; axis a of width d_a gets the columns
// after those of axes < a, with ω_j = θ^(−2j/d_a) and angles in float64.
RopeTables rope_from_ids(const Tensor& ids, const std::vector<int64_t>& axes_dims, double theta = 10000.0);

// Wan: the (frames, rows, columns) token grid in row-major order, positions 0.. on each axis; the same
// per-axis tables as rope_from_ids on the grid's ids.
RopeTables rope_grid(std::array<int64_t, 3> grid, std::array<int64_t, 3> axes_dims, double theta = 10000.0);

// LTX-Video: full-width tables (D = the attention's inner dim) over fractional coordinates. Grid
// position p on axis a becomes p·scale_a·patch_a/base_a (float32, with no scale when absent); for
// each of the D/6 frequencies f_i = θ^(i/(D/6 − 1))·π/2 the three axes follow in turn, with angle
// f_i·(2·coordinate − 1); the first D mod 6 columns are the identity rotation.
struct FractionalRope {
  std::optional<std::array<double, 3>> interpolation_scale;  // rope_interpolation_scale
  std::array<int64_t, 3> patch{1, 1, 1};                     // patch_size_t, patch_size, patch_size
  std::array<double, 3> base{20.0, 2048.0, 2048.0};          // base_num_frames, base_height, base_width
  double theta = 10000.0;
};
RopeTables fractional_rope(int64_t dim, std::array<int64_t, 3> grid, const FractionalRope& options);

// Qwen-Image (QwenEmbedRope): image segments k = 0.. of (frames, height, width) tokens, row-major and
// concatenated; segment k's frame positions are k.., rows and columns 0.. — or, with scale_rope,
// centred: row r ↦ r − (h − h/2), column c ↦ c − (w − w/2). Text token j sits at m + j on every axis,
// m = the largest h/2, w/2 over the segments (h, w without scale_rope). ω_j = 1/θ^(2j/d_a) and the
// angles are float32 products, as torch computes them.
struct PolarRope {
  RopeTables image, text;
};
struct ImageSegment {
  int64_t frames, height, width;
};
PolarRope polar_rope(const std::vector<ImageSegment>& segments, int64_t text_tokens, std::array<int64_t, 3> axes_dims,
                     bool scale_rope, double theta = 10000.0);

// x (B, S, H, Dh) rotated by tables of width Dh (one rotation per head) or H·Dh (LTX: one across the
// heads, as if before the head split). Tables (S, W) or (1, S, 1, W).
Tensor apply_rope(const Tensor& x, const RopeTables& tables);

}  // namespace cpdit::models::common
