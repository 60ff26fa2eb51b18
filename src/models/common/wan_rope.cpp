#include <cpdit/core/error.hpp>
#include <cpdit/models/common/wan_layers.hpp>

namespace cpdit::models::common::wan {

RotaryPosEmbed::RotaryPosEmbed(int64_t head_dim, std::array<int64_t, 3> patch_size, int64_t max_seq_len)
    : axes_dims_{head_dim - 4 * (head_dim / 6), 2 * (head_dim / 6), 2 * (head_dim / 6)},
      patch_size_(patch_size),
      max_seq_len_(max_seq_len) {}

std::vector<Tensor> RotaryPosEmbed::forward(const Tensor& hidden_states) const {
  return with_hooks({{"hidden_states", hidden_states}}, [&](const nn::TensorMap& in) {
    const Tensor& latent = in.at("hidden_states");
    CPDIT_CHECK(latent.dim() == 5, invalid_argument, "Wan RoPE needs the latent (B, C, F, H, W), got ",
                latent.describe());
    std::array<int64_t, 3> grid{};
    for (int a = 0; a < 3; ++a) {
      grid[a] = latent.size(2 + a) / patch_size_[a];
      CPDIT_CHECK(grid[a] <= max_seq_len_, invalid_argument, "Wan RoPE: the latent has ", grid[a],
                  " positions on axis ", a, ", more than rope_max_seq_len (", max_seq_len_, ")");
    }
    const common::RopeTables t = common::rope_grid(grid, axes_dims_);
    const Shape shape{1, t.cos.size(0), 1, t.cos.size(1)};  // the plan splits dim 1 of these 4-dim tables
    return std::vector<Tensor>{t.cos.reshape(shape), t.sin.reshape(shape)};
  });
}

}  // namespace cpdit::models::common::wan
