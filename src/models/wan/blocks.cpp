#include <cpdit/attention/attention.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/wan/blocks.hpp>

namespace cpdit::models::wan {

namespace k = kernels;

namespace {
std::vector<Tensor> one(Tensor t) { return {std::move(t)}; }
}  // namespace

// ---- embeddings -----------------------------------------------------------------------------------

PatchEmbedding::PatchEmbedding(int64_t in_channels, int64_t dim, std::array<int64_t, 3> patch_size)
    : weight_(add_parameter("weight", {dim, in_channels, patch_size[0], patch_size[1], patch_size[2]})),
      bias_(add_parameter("bias", {dim})),
      patch_size_(patch_size) {}

Tensor PatchEmbedding::forward(const Tensor& input) const {
  return with_hooks({{"input", input}}, [&](const nn::TensorMap& in) {
    return one(k::patch_embed(in.at("input"), weight_.value, bias_.value.values("patch embedding"), patch_size_));
  })[0];
}

TextProjection::TextProjection(int64_t in, int64_t dim)
    : linear_1_(add_module<nn::Linear>("linear_1", in, dim)), linear_2_(add_module<nn::Linear>("linear_2", dim, dim)) {}

Tensor TextProjection::forward(const Tensor& caption) const {
  return with_hooks({{"caption", caption}}, [&](const nn::TensorMap& in) {
    return one(linear_2_.forward(k::gelu(linear_1_.forward(in.at("caption")), /*tanh_approx=*/true)));
  })[0];
}

ConditionEmbedder::ConditionEmbedder(int64_t dim, int64_t freq_dim, int64_t text_dim)
    : freq_dim_(freq_dim),
      time_embedder_(add_module<flux::MlpEmbedder>("time_embedder", freq_dim, dim)),
      time_proj_(add_module<nn::Linear>("time_proj", dim, 6 * dim)),
      text_embedder_(add_module<TextProjection>("text_embedder", text_dim, dim)) {}

std::vector<Tensor> ConditionEmbedder::forward(const Tensor& timestep, const Tensor& encoder_hidden_states) const {
  return with_hooks({{"timestep", timestep}, {"encoder_hidden_states", encoder_hidden_states}},
                    [&](const nn::TensorMap& in) {
                      const Tensor t = in.at("timestep").to(DType::f32);
                      CPDIT_CHECK(t.dim() == 1 || t.dim() == 2, invalid_argument,
                                  "Wan timestep must be (B,) or per token (B, S), got ", t.describe());
                      // The raw timestep (0..1000) goes into the sinusoid: no scaling (unlike FLUX.1).
                      Tensor temb = time_embedder_.forward(flux::timestep_sinusoid(t.reshape({-1}), freq_dim_));
                      Tensor proj = time_proj_.forward(k::silu(temb));
                      if (t.dim() == 2) {
                        temb = temb.reshape({t.size(0), t.size(1), -1});
                        proj = proj.reshape({t.size(0), t.size(1), -1});
                      }
                      return std::vector<Tensor>{temb, proj, text_embedder_.forward(in.at("encoder_hidden_states"))};
                    });
}

// ---- attention ------------------------------------------------------------------------------------

Attention::Attention(int64_t dim, int64_t heads, int64_t head_dim, float eps)
    : heads_(heads),
      head_dim_(head_dim),
      to_q_(add_module<nn::Linear>("to_q", dim, dim)),
      to_k_(add_module<nn::Linear>("to_k", dim, dim)),
      to_v_(add_module<nn::Linear>("to_v", dim, dim)),
      to_out_(add_module<nn::Container>("to_out").add_module<nn::Linear>("0", dim, dim)),
      norm_q_(add_module<nn::RMSNorm>("norm_q", dim, eps)),
      norm_k_(add_module<nn::RMSNorm>("norm_k", dim, eps)) {}

Tensor Attention::forward(const Tensor& hidden_states, const Tensor& encoder_hidden_states, const Tensor& cos,
                          const Tensor& sin) const {
  nn::TensorMap args{{"hidden_states", hidden_states}, {"encoder_hidden_states", encoder_hidden_states},
                     {"cos", cos}, {"sin", sin}};
  return with_hooks(std::move(args), [&](const nn::TensorMap& in) {
    const Tensor& x = in.at("hidden_states");
    const bool cross = in.at("encoder_hidden_states").defined();
    const Tensor& source = cross ? in.at("encoder_hidden_states") : x;
    // The RMSNorm spans all heads, so it runs on (B, S, D) before the heads are split (and before any
    // Ulysses exchange, which the dispatcher does).
    auto heads = [&](const Tensor& t) { return t.reshape({t.size(0), t.size(1), heads_, head_dim_}); };
    Tensor q = heads(norm_q_.forward(to_q_.forward(x)));
    Tensor key = heads(norm_k_.forward(to_k_.forward(source)));
    Tensor v = heads(to_v_.forward(source));
    attention::Options options;
    if (cross) {
      // Text keys are whole on every rank: attend to them locally, never through the ring (spec §10).
      options.kv = attention::KvPlacement::replicated;
    } else {
      q = k::rope(q, in.at("cos"), in.at("sin"));
      key = k::rope(key, in.at("cos"), in.at("sin"));
    }
    Tensor o = attention::dispatch(q, key, v, options).out;
    return one(to_out_.forward(o.reshape({o.size(0), o.size(1), heads_ * head_dim_})));
  })[0];
}

// ---- block ----------------------------------------------------------------------------------------

std::vector<Tensor> modulation(const Weight& table_weight, const Tensor& emb) {
  // Small (n x D): widened per call, so a half-precision checkpoint's table stays as stored.
  const Tensor table = table_weight.values("Wan modulation").to(DType::f32);
  const int64_t n = table.size(1);
  CPDIT_CHECK((emb.dim() == 3 || emb.dim() == 4) && (emb.size(-2) == n || emb.size(-2) == 1) &&
                  emb.size(-1) == table.size(2),
              invalid_argument, "Wan modulation: embedding must be (B, ", n, " or 1, D) or (B, S, ", n,
              " or 1, D) for table ", table.describe(), ", got ", emb.describe());
  // One row for all n (the output head adds temb itself to each row of its table).
  const Tensor rows = emb.size(-2) == n ? emb : cat(std::vector<Tensor>(size_t(n), emb), emb.dim() - 2);
  Tensor sum = k::add(rows, table.reshape({n, table.size(2)}));
  std::vector<Tensor> out;
  for (int64_t i = 0; i < n; ++i)
    out.push_back(emb.dim() == 3 ? sum.narrow(1, i, 1) : sum.select(2, i));  // (B, 1, D) or (B, S, D)
  return out;
}

Block::Block(int64_t dim, int64_t heads, int64_t head_dim, int64_t ffn_dim, bool cross_attn_norm, float eps)
    : eps_(eps),
      attn1_(add_module<Attention>("attn1", dim, heads, head_dim, eps)),
      attn2_(add_module<Attention>("attn2", dim, heads, head_dim, eps)),
      norm2_(cross_attn_norm ? &add_module<nn::LayerNorm>("norm2", dim, eps, /*affine=*/true) : nullptr),
      ffn_(add_module<flux::FeedForward>("ffn", dim, ffn_dim)),
      scale_shift_table_(add_parameter("scale_shift_table", {1, 6, dim})) {}

Tensor Block::forward(const Tensor& hidden_states, const Tensor& encoder_hidden_states, const Tensor& temb,
                      const Tensor& rotary_cos, const Tensor& rotary_sin) const {
  nn::TensorMap args{{"hidden_states", hidden_states}, {"encoder_hidden_states", encoder_hidden_states},
                     {"temb", temb}, {"rotary_cos", rotary_cos}, {"rotary_sin", rotary_sin}};
  return with_hooks(std::move(args), [&](const nn::TensorMap& in) {
    const Tensor& x = in.at("hidden_states");
    // shift, scale, gate (self-attention), c_shift, c_scale, c_gate (feed-forward)
    auto m = modulation(scale_shift_table_.value, in.at("temb"));
    Tensor a = attn1_.forward(k::layer_norm_modulate(x, m[1], m[0], eps_), {}, in.at("rotary_cos"), in.at("rotary_sin"));
    Tensor h = x.clone();  // never write into the input, which a hook may hold
    k::add_mul_(h, a, m[2]);
    k::add_(h, attn2_.forward(norm2_ ? norm2_->forward(h) : h, in.at("encoder_hidden_states"), {}, {}));
    k::add_mul_(h, ffn_.forward(k::layer_norm_modulate(h, m[4], m[3], eps_)), m[5]);
    return one(h);
  })[0];
}

}  // namespace cpdit::models::wan
