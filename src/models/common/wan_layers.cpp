#include <cpdit/core/error.hpp>
#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/common/wan_layers.hpp>

namespace cpdit::models::common::wan {

namespace k = kernels;
using common::Activation;

// ---- embeddings -----------------------------------------------------------------------------------

PatchEmbedding::PatchEmbedding(int64_t in_channels, int64_t dim, std::array<int64_t, 3> patch_size)
    : weight_(add_parameter("weight", {dim, in_channels, patch_size[0], patch_size[1], patch_size[2]})),
      bias_(add_parameter("bias", {dim})),
      patch_size_(patch_size) {}

Tensor PatchEmbedding::forward(const Tensor& input) const {
  return with_hooks({{"input", input}}, [&](const nn::TensorMap& in) {
    return std::vector<Tensor>{
        k::patch_embed(in.at("input"), weight_.value, bias_.value.values("patch embedding"), patch_size_)};
  })[0];
}

ImageEmbedding::ImageEmbedding(int64_t image_dim, int64_t dim, int64_t pos_embed_seq_len)
    : image_dim_(image_dim),
      pos_embed_(pos_embed_seq_len > 0 ? &add_parameter("pos_embed", {1, pos_embed_seq_len, image_dim}) : nullptr),
      norm1_(add_module<nn::LayerNorm>("norm1", image_dim, 1e-5f, /*affine=*/true)),
      ff_(add_module<common::FeedForward>("ff", image_dim, image_dim, Activation::gelu, /*gated=*/false, dim)),
      norm2_(add_module<nn::LayerNorm>("norm2", dim, 1e-5f, /*affine=*/true)) {}

Tensor ImageEmbedding::forward(const Tensor& encoder_hidden_states_image) const {
  return with_hooks({{"encoder_hidden_states_image", encoder_hidden_states_image}}, [&](const nn::TensorMap& in) {
    Tensor x = in.at("encoder_hidden_states_image").to(DType::f32).contiguous();
    CPDIT_CHECK(x.dim() == 3 && x.size(2) == image_dim_, invalid_argument,
                "Wan encoder_hidden_states_image must be (B, L, ", image_dim_, "), got ", x.describe());
    if (pos_embed_) {
      const Tensor table = pos_embed_->value.values("image pos_embed").to(DType::f32);
      const int64_t images = x.size(0), tokens = x.size(1);
      CPDIT_CHECK(
          images % 2 == 0 && 2 * tokens == table.size(1), invalid_argument,
          "Wan encoder_hidden_states_image with pos_embed (FLF2V) must be a first and a last image per item, (2B, ",
          table.size(1) / 2, ", ", image_dim_, "), got ", x.describe());
      x = k::add(x.reshape({images / 2, 2 * tokens, image_dim_}), table);
    }
    return std::vector<Tensor>{norm2_.forward(ff_.forward(norm1_.forward(x)))};
  })[0];
}

ConditionEmbedder::ConditionEmbedder(int64_t dim, int64_t freq_dim, int64_t text_dim, SinusoidPrecision precision,
                                     int64_t image_dim, int64_t pos_embed_seq_len)
    : freq_dim_(freq_dim),
      precision_(precision),
      time_embedder_(add_module<common::MlpEmbedder>("time_embedder", freq_dim, dim, Activation::silu)),
      time_proj_(add_module<nn::Linear>("time_proj", dim, 6 * dim)),
      text_embedder_(add_module<common::MlpEmbedder>("text_embedder", text_dim, dim, Activation::gelu_tanh)),
      image_embedder_(image_dim > 0 ? &add_module<ImageEmbedding>("image_embedder", image_dim, dim, pos_embed_seq_len)
                                    : nullptr) {}

std::vector<Tensor> ConditionEmbedder::forward(const Tensor& timestep, const Tensor& encoder_hidden_states,
                                               const Tensor& encoder_hidden_states_image) const {
  CPDIT_CHECK(encoder_hidden_states_image.defined() == (image_embedder_ != nullptr), invalid_argument,
              image_embedder_
                  ? "this Wan image-to-video model (image_dim set) needs the input encoder_hidden_states_image"
                  : "this Wan model has no image conditioning (image_dim is null): it takes no "
                    "encoder_hidden_states_image");
  return with_hooks({{"timestep", timestep}, {"encoder_hidden_states", encoder_hidden_states},
                     {"encoder_hidden_states_image", encoder_hidden_states_image}},
                    [&](const nn::TensorMap& in) {
                      // Integer timesteps (SkyReels-V2 passes I64) are exact in f32 up to 2^24.
                      const Tensor t = in.at("timestep").to(DType::f32);
                      CPDIT_CHECK(t.dim() == 1 || t.dim() == 2, invalid_argument,
                                  "Wan timestep must be (B,) or per token (B, S), got ", t.describe());
                      // The raw timestep (0..1000) goes into the sinusoid: no scaling (unlike FLUX.1).
                      const Tensor flat = t.reshape({-1});
                      Tensor temb = time_embedder_.forward(precision_ == SinusoidPrecision::f32
                                                               ? common::timestep_sinusoid(flat, freq_dim_)
                                                               : common::timestep_sinusoid_f64(flat, freq_dim_));
                      Tensor proj = time_proj_.forward(k::silu(temb));
                      if (t.dim() == 2) {
                        temb = temb.reshape({t.size(0), t.size(1), -1});
                        proj = proj.reshape({t.size(0), t.size(1), -1});
                      }
                      std::vector<Tensor> out{temb, proj, text_embedder_.forward(in.at("encoder_hidden_states"))};
                      if (image_embedder_)
                        out.push_back(image_embedder_->forward(in.at("encoder_hidden_states_image")));
                      return out;
                    });
}

// ---- block ----------------------------------------------------------------------------------------

namespace {

common::AttentionShape cross_attention_shape(int64_t dim, int64_t heads, int64_t head_dim, float eps, bool image_keys) {
  common::AttentionShape shape{dim, heads, head_dim, common::QkNorm::across_heads, eps};
  shape.image_keys = image_keys;
  return shape;
}

}  // namespace

Block::Block(int64_t dim, int64_t heads, int64_t head_dim, int64_t ffn_dim, bool cross_attn_norm, float eps,
             bool image_keys)
    : eps_(eps),
      attn1_(add_module<common::Attention>("attn1", common::AttentionShape{dim, heads, head_dim,
                                                                           common::QkNorm::across_heads, eps})),
      attn2_(add_module<common::Attention>("attn2", cross_attention_shape(dim, heads, head_dim, eps, image_keys))),
      norm2_(cross_attn_norm ? &add_module<nn::LayerNorm>("norm2", dim, eps, /*affine=*/true) : nullptr),
      ffn_(add_module<common::FeedForward>("ffn", dim, ffn_dim, Activation::gelu_tanh)),
      scale_shift_table_(add_parameter("scale_shift_table", {1, 6, dim})) {}

Tensor Block::forward(const Tensor& hidden_states, const Tensor& encoder_hidden_states, const Tensor& temb,
                      const Tensor& rotary_cos, const Tensor& rotary_sin,
                      const attention::Mask& self_attention_mask, const Tensor& encoder_hidden_states_image) const {
  nn::TensorMap args{{"hidden_states", hidden_states}, {"encoder_hidden_states", encoder_hidden_states},
                     {"temb", temb}, {"rotary_cos", rotary_cos}, {"rotary_sin", rotary_sin},
                     {"encoder_hidden_states_image", encoder_hidden_states_image}};
  return with_hooks(std::move(args), [&](const nn::TensorMap& in) {
    const Tensor& x = in.at("hidden_states");
    // shift, scale, gate (self-attention), c_shift, c_scale, c_gate (feed-forward)
    auto m = common::scale_shift_modulation(scale_shift_table_.value, in.at("temb"));
    Tensor a = attn1_.forward(common::norm_modulate(x, m[1], m[0], eps_), {}, in.at("rotary_cos"), in.at("rotary_sin"),
                              /*text_keep=*/{}, self_attention_mask);
    Tensor h = common::gated_residual(x, a, m[2]);  // never write into the input, which a hook may hold
    k::add_(h, attn2_.forward(norm2_ ? norm2_->forward(h) : h, in.at("encoder_hidden_states"), {}, {}, {}, {},
                              in.at("encoder_hidden_states_image")));
    common::add_gated_(h, ffn_.forward(common::norm_modulate(h, m[4], m[3], eps_)), m[5]);
    return std::vector<Tensor>{h};
  })[0];
}

// ---- output -----------------------------------------------------------------------------------

std::array<int64_t, 3> checked_patch_grid(const Tensor& latent, const Tensor& text, int64_t in_channels,
                                          std::array<int64_t, 3> patch, int64_t text_dim, const std::string& model) {
  CPDIT_CHECK(latent.dim() == 5 && latent.size(1) == in_channels, invalid_argument, model,
              " hidden_states must be (B, ", in_channels, ", F, H, W), got ", latent.describe());
  std::array<int64_t, 3> grid{};
  for (int a = 0; a < 3; ++a) {
    CPDIT_CHECK(latent.size(2 + a) % patch[a] == 0, invalid_argument, model, " hidden_states ", latent.describe(),
                ": F, H, W must be multiples of the patch size");
    grid[a] = latent.size(2 + a) / patch[a];
  }
  CPDIT_CHECK(text.dim() == 3 && text.size(0) == latent.size(0) && text.size(2) == text_dim, invalid_argument, model,
              " encoder_hidden_states must be (", latent.size(0), ", L, ", text_dim, "), got ", text.describe());
  return grid;
}

Tensor unpatchify(const Tensor& tokens, std::array<int64_t, 3> patch, std::array<int64_t, 3> grid) {
  const Tensor y = tokens.contiguous();
  const int64_t batch = y.size(0), volume = patch[0] * patch[1] * patch[2];
  CPDIT_CHECK(y.dim() == 3 && y.size(1) == grid[0] * grid[1] * grid[2] && y.size(2) % volume == 0, internal,
              "unpatchify: tokens ", y.describe(), " do not match the grid");
  const int64_t channels = y.size(2) / volume;
  const int64_t F = grid[0] * patch[0], H = grid[1] * patch[1], W = grid[2] * patch[2];
  Tensor out = Tensor::empty({batch, channels, F, H, W});
  const float* src = y.data<float>();
  float* dst = out.data<float>();
#pragma omp parallel for collapse(2) num_threads(compute_threads())
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t f = 0; f < F; ++f)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t w = 0; w < W; ++w) {
            const int64_t token = ((f / patch[0]) * grid[1] + h / patch[1]) * grid[2] + w / patch[2];
            const int64_t within = ((f % patch[0]) * patch[1] + h % patch[1]) * patch[2] + w % patch[2];
            dst[(((b * channels + c) * F + f) * H + h) * W + w] =
                src[(b * y.size(1) + token) * y.size(2) + within * channels + c];
          }
  return out;
}

parallel::ContextParallelPlan token_split_plan() {
  using parallel::ContextParallelInput, parallel::ContextParallelOutput;
  parallel::ModulePlan rope;
  rope.outputs = {{0, ContextParallelInput{1, 4, /*split_output=*/true}},   // cos (1, S, 1, head_dim)
                  {1, ContextParallelInput{1, 4, /*split_output=*/true}}};  // sin
  parallel::ModulePlan first_block;
  first_block.inputs = {{"hidden_states", ContextParallelInput{1, 3}}};
  parallel::ModulePlan proj_out;
  proj_out.gathers = {{0, ContextParallelOutput{1, 3}}};
  return {{"rope", rope}, {"blocks.0", first_block}, {"proj_out", proj_out}};
}

}  // namespace cpdit::models::common::wan
