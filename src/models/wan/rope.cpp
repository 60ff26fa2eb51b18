#include <cpdit/core/error.hpp>
#include <cpdit/models/wan/blocks.hpp>

#include <cmath>

namespace cpdit::models::wan {

RotaryPosEmbed::RotaryPosEmbed(int64_t head_dim, std::array<int64_t, 3> patch_size, int64_t max_seq_len)
    : axis_dims_{head_dim - 4 * (head_dim / 6), 2 * (head_dim / 6), 2 * (head_dim / 6)},
      patch_size_(patch_size),
      max_seq_len_(max_seq_len) {}

std::vector<Tensor> RotaryPosEmbed::forward(const Tensor& hidden_states) const {
  return with_hooks({{"hidden_states", hidden_states}}, [&](const nn::TensorMap& in) {
    const Tensor& latent = in.at("hidden_states");
    CPDIT_CHECK(latent.dim() == 5, invalid_argument, "Wan RoPE needs the latent (B, C, F, H, W), got ", latent.describe());
    std::array<int64_t, 3> grid{};
    for (int a = 0; a < 3; ++a) {
      grid[a] = latent.size(2 + a) / patch_size_[a];
      CPDIT_CHECK(grid[a] <= max_seq_len_, invalid_argument, "Wan RoPE: the latent has ", grid[a],
                  " positions on axis ", a, ", more than rope_max_seq_len (", max_seq_len_, ")");
    }
    const int64_t head_dim = axis_dims_[0] + axis_dims_[1] + axis_dims_[2];
    const int64_t tokens = grid[0] * grid[1] * grid[2];

    // Per axis: cos/sin of position * omega_j (omega_j = 10000^(-2j/d)) in float64, rounded to
    // float32 and repeated for both members of pair j (diffusers' get_1d_rotary_pos_embed, float64).
    std::array<std::vector<float>, 3> cos_axis, sin_axis;  // [position][column within the axis]
    for (int a = 0; a < 3; ++a) {
      const int64_t d = axis_dims_[a];
      cos_axis[a].resize(size_t(grid[a] * d));
      sin_axis[a].resize(size_t(grid[a] * d));
      for (int64_t p = 0; p < grid[a]; ++p)
        for (int64_t j = 0; j < d / 2; ++j) {
          const double angle = double(p) * (1.0 / std::pow(10000.0, double(2 * j) / double(d)));
          const float c = float(std::cos(angle)), s = float(std::sin(angle));
          cos_axis[a][size_t(p * d + 2 * j)] = cos_axis[a][size_t(p * d + 2 * j + 1)] = c;
          sin_axis[a][size_t(p * d + 2 * j)] = sin_axis[a][size_t(p * d + 2 * j + 1)] = s;
        }
    }

    Tensor cos = Tensor::empty({1, tokens, 1, head_dim}), sin = Tensor::empty({1, tokens, 1, head_dim});
    float* co = cos.data<float>();
    float* so = sin.data<float>();
    for (int64_t f = 0; f < grid[0]; ++f)
      for (int64_t h = 0; h < grid[1]; ++h)
        for (int64_t w = 0; w < grid[2]; ++w) {
          const int64_t token = (f * grid[1] + h) * grid[2] + w;
          const std::array<int64_t, 3> position{f, h, w};
          int64_t column = token * head_dim;
          for (int a = 0; a < 3; ++a) {
            const int64_t d = axis_dims_[a];
            for (int64_t i = 0; i < d; ++i) {
              co[column + i] = cos_axis[a][size_t(position[a] * d + i)];
              so[column + i] = sin_axis[a][size_t(position[a] * d + i)];
            }
            column += d;
          }
        }
    return std::vector<Tensor>{cos, sin};
  });
}

}  // namespace cpdit::models::wan
