#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/common/rope.hpp>

#include <cmath>
#include <numbers>
#include <numeric>

namespace cpdit::models::common {

namespace {

RopeTables empty_tables(int64_t rows, int64_t width) {
  return {Tensor::empty({rows, width}), Tensor::empty({rows, width})};
}

// Pair `pair` of row `row` rotates by `angle`: cos and sin rounded to float32, written to both columns.
void set_pair(RopeTables& t, int64_t row, int64_t pair, double angle) {
  const int64_t at = row * t.cos.size(1) + 2 * pair;
  float* c = t.cos.data<float>();
  float* s = t.sin.data<float>();
  c[at] = c[at + 1] = float(std::cos(angle));
  s[at] = s[at + 1] = float(std::sin(angle));
}

// Columns [0, width) of src's row `from` into columns [column, column + width) of dst's row `to`.
void copy_columns(const RopeTables& src, int64_t from, RopeTables& dst, int64_t to, int64_t column) {
  const int64_t width = src.cos.size(1);
  for (const auto& [s, d] : {std::pair{&src.cos, &dst.cos}, std::pair{&src.sin, &dst.sin}})
    std::copy_n(s->data<float>() + from * width, width, d->data<float>() + to * d->size(1) + column);
}

// One axis of width d: position p, pair j -> p·ω_j with ω_j = 1/θ^(2j/d), in float64 (diffusers'
// get_1d_rotary_pos_embed with float64 frequencies, as FLUX.1 and Wan call it).
RopeTables axis_tables(const std::vector<double>& positions, int64_t d, double theta) {
  RopeTables t = empty_tables(int64_t(positions.size()), d);
  for (int64_t j = 0; j < d / 2; ++j) {
    const double omega = 1.0 / std::pow(theta, double(2 * j) / double(d));
    for (size_t p = 0; p < positions.size(); ++p) set_pair(t, int64_t(p), j, positions[p] * omega);
  }
  return t;
}

void check_axes(const std::vector<int64_t>& axes_dims) {
  for (int64_t d : axes_dims)
    CPDIT_CHECK(d > 0 && d % 2 == 0, invalid_argument, "RoPE axis widths must be positive and even, got ", d);
}

}  // namespace

RopeTables rope_from_ids(const Tensor& ids, const std::vector<int64_t>& axes_dims, double theta) {
  check_axes(axes_dims);
  const Tensor pos = ids.to(DType::f32).contiguous();
  const int64_t axes = int64_t(axes_dims.size());
  CPDIT_CHECK(pos.dim() == 2 && pos.size(1) == axes, invalid_argument, "RoPE ids must be (N, ", axes, "), got ",
              pos.describe());
  const int64_t n = pos.size(0);
  RopeTables out = empty_tables(n, std::accumulate(axes_dims.begin(), axes_dims.end(), int64_t(0)));
  int64_t column = 0;
  for (int64_t a = 0; a < axes; ++a) {
    std::vector<double> positions(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) positions[size_t(i)] = pos.data<float>()[i * axes + a];
    const RopeTables axis = axis_tables(positions, axes_dims[size_t(a)], theta);
    for (int64_t i = 0; i < n; ++i) copy_columns(axis, i, out, i, column);
    column += axes_dims[size_t(a)];
  }
  return out;
}

RopeTables rope_grid(std::array<int64_t, 3> grid, std::array<int64_t, 3> axes_dims, double theta) {
  check_axes({axes_dims.begin(), axes_dims.end()});
  // Each axis has only grid[a] distinct positions: tabulate those, then gather per token.
  std::array<RopeTables, 3> axis;
  for (int a = 0; a < 3; ++a) {
    CPDIT_CHECK(grid[a] > 0, invalid_argument, "RoPE grid sizes must be positive, got ", grid[a], " on axis ", a);
    std::vector<double> positions(static_cast<size_t>(grid[a]));
    std::iota(positions.begin(), positions.end(), 0.0);
    axis[size_t(a)] = axis_tables(positions, axes_dims[size_t(a)], theta);
  }
  RopeTables out = empty_tables(grid[0] * grid[1] * grid[2], axes_dims[0] + axes_dims[1] + axes_dims[2]);
  for (int64_t f = 0; f < grid[0]; ++f)
    for (int64_t h = 0; h < grid[1]; ++h)
      for (int64_t w = 0; w < grid[2]; ++w) {
        const int64_t token = (f * grid[1] + h) * grid[2] + w;
        copy_columns(axis[0], f, out, token, 0);
        copy_columns(axis[1], h, out, token, axes_dims[0]);
        copy_columns(axis[2], w, out, token, axes_dims[0] + axes_dims[1]);
      }
  return out;
}

RopeTables fractional_rope(int64_t dim, std::array<int64_t, 3> grid, const FractionalRope& options) {
  const int64_t frequencies = dim / 6, padding = dim % 6;
  CPDIT_CHECK(frequencies >= 2, invalid_argument, "fractional RoPE needs a width of at least 12, got ", dim);
  // Every step in float32, in torch's order. linspace(0, 1, n) as torch computes it: from the start
  // below the half-way index, from the end above it.
  const float step = 1.0f / float(frequencies - 1);
  std::vector<float> freq(static_cast<size_t>(frequencies));
  for (int64_t i = 0; i < frequencies; ++i) {
    const float exponent = i < frequencies / 2 ? step * float(i) : 1.0f - step * float(frequencies - 1 - i);
    const float f = float(std::pow(options.theta, double(exponent)));
    freq[size_t(i)] = (f * std::numbers::pi_v<float>) / 2.0f;
  }
  // Coordinate of grid position p on axis a: ((p·scale_a)·patch_a)/base_a, then 2·c − 1.
  auto centred = [&](int a, int64_t p) {
    float c = float(p);
    if (options.interpolation_scale)
      c = ((c * float((*options.interpolation_scale)[size_t(a)])) * float(options.patch[size_t(a)])) /
          float(options.base[size_t(a)]);
    return c * 2.0f - 1.0f;
  };
  RopeTables out = empty_tables(grid[0] * grid[1] * grid[2], dim);
  for (int64_t f = 0; f < grid[0]; ++f)
    for (int64_t h = 0; h < grid[1]; ++h)
      for (int64_t w = 0; w < grid[2]; ++w) {
        const int64_t token = (f * grid[1] + h) * grid[2] + w;
        const std::array<float, 3> coordinate{centred(0, f), centred(1, h), centred(2, w)};
        for (int64_t j = 0; j < padding; ++j) {  // identity rotation on the leading columns
          out.cos.data<float>()[token * dim + j] = 1.0f;
          out.sin.data<float>()[token * dim + j] = 0.0f;
        }
        // The pairs start after the padding, which is even (dim and 6·frequencies are both even).
        for (int64_t i = 0; i < frequencies; ++i)
          for (int a = 0; a < 3; ++a) {
            const float angle = freq[size_t(i)] * coordinate[size_t(a)];
            const int64_t at = token * dim + padding + 2 * (3 * i + a);
            out.cos.data<float>()[at] = out.cos.data<float>()[at + 1] = float(std::cos(double(angle)));
            out.sin.data<float>()[at] = out.sin.data<float>()[at + 1] = float(std::sin(double(angle)));
          }
      }
  return out;
}

PolarRope polar_rope(const std::vector<ImageSegment>& segments, int64_t text_tokens, std::array<int64_t, 3> axes_dims,
                     bool scale_rope, double theta) {
  check_axes({axes_dims.begin(), axes_dims.end()});
  CPDIT_CHECK(!segments.empty() && text_tokens >= 0, invalid_argument,
              "polar RoPE needs at least one image segment and a text length >= 0");
  // ω_j = 1/θ^((2j)/d) and the angles position·ω_j, each rounded to float32 as torch computes them.
  std::array<std::vector<float>, 3> omega;
  for (int a = 0; a < 3; ++a)
    for (int64_t j = 0; j < axes_dims[size_t(a)] / 2; ++j) {
      const float exponent = float(2 * j) / float(axes_dims[size_t(a)]);
      omega[size_t(a)].push_back(1.0f / float(std::pow(theta, double(exponent))));
    }
  auto set_token = [&](RopeTables& t, int64_t row, std::array<int64_t, 3> position) {
    int64_t pair = 0;
    for (int a = 0; a < 3; ++a)
      for (float w : omega[size_t(a)]) set_pair(t, row, pair++, double(float(position[size_t(a)]) * w));
  };
  const int64_t width = axes_dims[0] + axes_dims[1] + axes_dims[2];
  int64_t image_tokens = 0, text_start = 0;
  for (const ImageSegment& s : segments) {
    CPDIT_CHECK(s.frames > 0 && s.height > 0 && s.width > 0, invalid_argument,
                "polar RoPE image segments must have positive frames, height, width");
    image_tokens += s.frames * s.height * s.width;
    text_start = std::max(text_start, scale_rope ? std::max(s.height / 2, s.width / 2) : std::max(s.height, s.width));
  }
  PolarRope out{empty_tables(image_tokens, width), empty_tables(text_tokens, width)};
  int64_t row = 0;
  for (size_t k = 0; k < segments.size(); ++k) {
    const ImageSegment& s = segments[k];
    // With scale_rope the rows and columns are centred on the middle of the image.
    const int64_t row0 = scale_rope ? s.height - s.height / 2 : 0, column0 = scale_rope ? s.width - s.width / 2 : 0;
    for (int64_t f = 0; f < s.frames; ++f)
      for (int64_t h = 0; h < s.height; ++h)
        for (int64_t w = 0; w < s.width; ++w) set_token(out.image, row++, {int64_t(k) + f, h - row0, w - column0});
  }
  for (int64_t j = 0; j < text_tokens; ++j) set_token(out.text, j, {text_start + j, text_start + j, text_start + j});
  return out;
}

Tensor apply_rope(const Tensor& x, const RopeTables& tables) {
  CPDIT_CHECK(x.dim() == 4, invalid_argument, "RoPE input must be (B, S, H, Dh), got ", x.describe());
  const int64_t width = tables.cos.size(-1), heads = x.size(2), head_dim = x.size(3);
  if (width == head_dim) return kernels::rope(x, tables.cos, tables.sin);
  CPDIT_CHECK(width == heads * head_dim, invalid_argument, "RoPE tables of width ", width, " fit neither the head dim ",
              head_dim, " nor all ", heads, " heads");
  // Pairs never straddle two heads (Dh is even), so one rotation across the heads is a rotation of
  // the tokens seen as a single wide head.
  const Tensor wide = x.contiguous().reshape({x.size(0), x.size(1), 1, width});
  return kernels::rope(wide, tables.cos, tables.sin).reshape(x.shape());
}

}  // namespace cpdit::models::common
