#include <cpdit/attention/attention.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/flux/blocks.hpp>

#include <cmath>

namespace cpdit::models::flux {

namespace k = kernels;

namespace {
constexpr float kEps = 1e-6f;

// (B, C) -> (B, 1, C): a modulation vector broadcast over the tokens.
Tensor over_tokens(const Tensor& v) { return v.contiguous().reshape({v.size(0), 1, v.size(1)}); }

// x + y * gate as a new tensor: a block never writes into its inputs, which hooks may hold.
Tensor gated_residual(const Tensor& x, const Tensor& y, const Tensor& gate) {
  Tensor out = x.clone();
  k::add_mul_(out, y, over_tokens(gate));
  return out;
}

std::vector<Tensor> one(Tensor t) { return {std::move(t)}; }
}  // namespace

// ---- embeddings -----------------------------------------------------------------------------------

MlpEmbedder::MlpEmbedder(int64_t in, int64_t dim)
    : linear_1_(add_module<nn::Linear>("linear_1", in, dim)), linear_2_(add_module<nn::Linear>("linear_2", dim, dim)) {}

Tensor MlpEmbedder::forward(const Tensor& x) const {
  return with_hooks({{"input", x}}, [&](const nn::TensorMap& in) {
    return one(linear_2_.forward(k::silu(linear_1_.forward(in.at("input")))));
  })[0];
}

Tensor timestep_sinusoid(const Tensor& t, int64_t channels) {
  Tensor ts = t.to(DType::f32).contiguous();
  CPDIT_CHECK(ts.dim() == 1, invalid_argument, "timestep must be (B,), got ", ts.describe());
  const int64_t batch = ts.size(0), half = channels / 2;
  Tensor out = Tensor::empty({batch, channels});
  const float* tv = ts.data<float>();
  float* o = out.data<float>();
  // As diffusers' Timesteps in float32: exponent = -ln(10000) j / half, freq = exp(exponent), arg = t freq.
  const float neg_log_period = float(-std::log(10000.0));
  for (int64_t j = 0; j < half; ++j) {
    float exponent = (neg_log_period * float(j)) / float(half);
    float freq = float(std::exp(double(exponent)));
    for (int64_t b = 0; b < batch; ++b) {
      float arg = tv[b] * freq;
      o[b * channels + j] = float(std::cos(double(arg)));  // flip_sin_to_cos: cos half first
      o[b * channels + half + j] = float(std::sin(double(arg)));
    }
  }
  return out;
}

TimeTextEmbed::TimeTextEmbed(int64_t dim, int64_t pooled_dim, bool guidance)
    : timestep_embedder_(add_module<MlpEmbedder>("timestep_embedder", 256, dim)),
      guidance_embedder_(guidance ? &add_module<MlpEmbedder>("guidance_embedder", 256, dim) : nullptr),
      text_embedder_(add_module<MlpEmbedder>("text_embedder", pooled_dim, dim)) {}

Tensor TimeTextEmbed::forward(const Tensor& timestep, const Tensor& guidance, const Tensor& pooled) const {
  return with_hooks({{"timestep", timestep}, {"guidance", guidance}, {"pooled_projection", pooled}},
                    [&](const nn::TensorMap& in) {
                      Tensor temb = timestep_embedder_.forward(timestep_sinusoid(in.at("timestep"), 256));
                      if (guidance_embedder_) {
                        CPDIT_CHECK(in.at("guidance").defined(), invalid_argument,
                                    "this FLUX model has a guidance embedder: pass `guidance` (e.g. 3.5)");
                        k::add_(temb, guidance_embedder_->forward(timestep_sinusoid(in.at("guidance"), 256)));
                      }
                      k::add_(temb, text_embedder_.forward(in.at("pooled_projection")));
                      return one(temb);
                    })[0];
}

PosEmbed::PosEmbed(std::vector<int64_t> axes_dims) : axes_dims_(std::move(axes_dims)) {}

std::vector<Tensor> PosEmbed::forward(const Tensor& ids) const {
  return with_hooks({{"ids", ids}}, [&](const nn::TensorMap& in) {
    Tensor pos = in.at("ids").to(DType::f32).contiguous();
    CPDIT_CHECK(pos.dim() == 2 && pos.size(1) == int64_t(axes_dims_.size()), invalid_argument,
                "RoPE ids must be (N, ", axes_dims_.size(), "), got ", pos.describe());
    int64_t n = pos.size(0), width = 0;
    for (int64_t d : axes_dims_) width += d;
    Tensor cos = Tensor::empty({n, width}), sin = Tensor::empty({n, width});
    const float* p = pos.data<float>();
    float* c = cos.data<float>();
    float* s = sin.data<float>();
    // Per axis a of width d: omega_j = 1 / 10000^(2j/d), angles in float64 (as diffusers), then
    // rounded to float32 and repeated for each adjacent pair.
    int64_t column = 0;
    for (size_t a = 0; a < axes_dims_.size(); ++a) {
      int64_t d = axes_dims_[a];
      for (int64_t j = 0; j < d / 2; ++j) {
        double omega = 1.0 / std::pow(10000.0, double(2 * j) / double(d));
        for (int64_t i = 0; i < n; ++i) {
          double angle = double(p[i * int64_t(axes_dims_.size()) + int64_t(a)]) * omega;
          float cv = float(std::cos(angle)), sv = float(std::sin(angle));
          int64_t at = i * width + column + 2 * j;
          c[at] = c[at + 1] = cv;
          s[at] = s[at + 1] = sv;
        }
      }
      column += d;
    }
    return std::vector<Tensor>{cos, sin};
  });
}

// ---- attention ------------------------------------------------------------------------------------

Attention::Attention(int64_t dim, int64_t heads, int64_t head_dim, bool joint)
    : heads_(heads),
      head_dim_(head_dim),
      norm_q_(add_module<nn::RMSNorm>("norm_q", head_dim, kEps)),
      norm_k_(add_module<nn::RMSNorm>("norm_k", head_dim, kEps)),
      to_q_(add_module<nn::Linear>("to_q", dim, dim)),
      to_k_(add_module<nn::Linear>("to_k", dim, dim)),
      to_v_(add_module<nn::Linear>("to_v", dim, dim)) {
  if (!joint) return;
  norm_added_q_ = &add_module<nn::RMSNorm>("norm_added_q", head_dim, kEps);
  norm_added_k_ = &add_module<nn::RMSNorm>("norm_added_k", head_dim, kEps);
  add_q_proj_ = &add_module<nn::Linear>("add_q_proj", dim, dim);
  add_k_proj_ = &add_module<nn::Linear>("add_k_proj", dim, dim);
  add_v_proj_ = &add_module<nn::Linear>("add_v_proj", dim, dim);
  to_out_ = &add_module<nn::Container>("to_out").add_module<nn::Linear>("0", dim, dim);
  to_add_out_ = &add_module<nn::Linear>("to_add_out", dim, dim);
}

Tensor Attention::project(const nn::Linear& proj, const nn::RMSNorm* norm, const Tensor& x) const {
  Tensor y = proj.forward(x);
  y = y.reshape({y.size(0), y.size(1), heads_, head_dim_});
  return norm ? norm->forward(y) : y;
}

std::vector<Tensor> Attention::forward(const Tensor& hidden_states, const Tensor& encoder_hidden_states,
                                       const Tensor& cos, const Tensor& sin) const {
  nn::TensorMap args{{"hidden_states", hidden_states}, {"encoder_hidden_states", encoder_hidden_states},
                     {"cos", cos}, {"sin", sin}};
  return with_hooks(std::move(args), [&](const nn::TensorMap& in) {
    const Tensor& x = in.at("hidden_states");
    Tensor q = project(to_q_, &norm_q_, x), key = project(to_k_, &norm_k_, x), v = project(to_v_, nullptr, x);
    int64_t text = 0;
    if (add_q_proj_) {  // joint attention: text tokens first
      const Tensor& c = in.at("encoder_hidden_states");
      text = c.size(1);
      q = cat({project(*add_q_proj_, norm_added_q_, c), q}, 1);
      key = cat({project(*add_k_proj_, norm_added_k_, c), key}, 1);
      v = cat({project(*add_v_proj_, nullptr, c), v}, 1);
    }
    q = k::rope(q, in.at("cos"), in.at("sin"));
    key = k::rope(key, in.at("cos"), in.at("sin"));
    Tensor o = attention::dispatch(q, key, v).out;
    o = o.reshape({o.size(0), o.size(1), heads_ * head_dim_});
    if (!add_q_proj_) return one(o);
    int64_t image = o.size(1) - text;
    return std::vector<Tensor>{to_out_->forward(o.narrow(1, text, image)), to_add_out_->forward(o.narrow(1, 0, text))};
  });
}

// ---- feed-forward and modulation ------------------------------------------------------------------

FeedForward::FeedForward(int64_t dim, int64_t hidden)
    : net_(add_module<nn::Container>("net")),
      proj_in_(net_.add_module<nn::Container>("0").add_module<nn::Linear>("proj", dim, hidden)),
      proj_out_(net_.add_module<nn::Linear>("2", hidden, dim)) {}

Tensor FeedForward::forward(const Tensor& x) const {
  return with_hooks({{"hidden_states", x}}, [&](const nn::TensorMap& in) {
    return one(proj_out_.forward(k::gelu(proj_in_.forward(in.at("hidden_states")), /*tanh_approx=*/true)));
  })[0];
}

std::vector<Tensor> modulation(const nn::Linear& linear, const Tensor& emb, int chunks) {
  Tensor m = linear.forward(k::silu(emb));
  int64_t dim = m.size(1) / chunks;
  std::vector<Tensor> out;
  for (int i = 0; i < chunks; ++i) out.push_back(m.narrow(1, i * dim, dim));
  return out;
}

AdaNorm::AdaNorm(int64_t dim, int chunks)
    : linear_(add_module<nn::Linear>("linear", dim, chunks * dim)), chunks_(chunks) {}

std::vector<Tensor> AdaNorm::forward(const Tensor& emb) const {
  return with_hooks({{"emb", emb}}, [&](const nn::TensorMap& in) { return modulation(linear_, in.at("emb"), chunks_); });
}

AdaLayerNormContinuous::AdaLayerNormContinuous(int64_t dim) : linear_(add_module<nn::Linear>("linear", dim, 2 * dim)) {}

Tensor AdaLayerNormContinuous::forward(const Tensor& x, const Tensor& emb) const {
  return with_hooks({{"x", x}, {"conditioning_embedding", emb}}, [&](const nn::TensorMap& in) {
    auto m = modulation(linear_, in.at("conditioning_embedding"), 2);  // scale, shift: in this order
    return one(k::layer_norm_modulate(in.at("x"), over_tokens(m[0]), over_tokens(m[1]), kEps));
  })[0];
}

// ---- blocks ---------------------------------------------------------------------------------------

DoubleBlock::DoubleBlock(int64_t dim, int64_t heads, int64_t head_dim)
    : norm1_(add_module<AdaNorm>("norm1", dim, 6)),
      norm1_context_(add_module<AdaNorm>("norm1_context", dim, 6)),
      attn_(add_module<Attention>("attn", dim, heads, head_dim, /*joint=*/true)),
      ff_(add_module<FeedForward>("ff", dim, 4 * dim)),
      ff_context_(add_module<FeedForward>("ff_context", dim, 4 * dim)) {}

std::vector<Tensor> DoubleBlock::forward(const Tensor& hidden_states, const Tensor& encoder_hidden_states,
                                         const Tensor& temb, const Tensor& cos, const Tensor& sin) const {
  nn::TensorMap args{{"hidden_states", hidden_states}, {"encoder_hidden_states", encoder_hidden_states},
                     {"temb", temb}, {"cos", cos}, {"sin", sin}};
  return with_hooks(std::move(args), [&](const nn::TensorMap& in) {
    const Tensor &x = in.at("hidden_states"), &c = in.at("encoder_hidden_states"), &emb = in.at("temb");
    // shift, scale, gate for attention, then for the MLP.
    auto m = norm1_.forward(emb);
    auto mc = norm1_context_.forward(emb);
    Tensor nx = k::layer_norm_modulate(x, over_tokens(m[1]), over_tokens(m[0]), kEps);
    Tensor nc = k::layer_norm_modulate(c, over_tokens(mc[1]), over_tokens(mc[0]), kEps);
    auto attn = attn_.forward(nx, nc, in.at("cos"), in.at("sin"));
    Tensor x1 = gated_residual(x, attn[0], m[2]);
    Tensor c1 = gated_residual(c, attn[1], mc[2]);
    k::add_mul_(x1, ff_.forward(k::layer_norm_modulate(x1, over_tokens(m[4]), over_tokens(m[3]), kEps)),
                over_tokens(m[5]));
    k::add_mul_(c1, ff_context_.forward(k::layer_norm_modulate(c1, over_tokens(mc[4]), over_tokens(mc[3]), kEps)),
                over_tokens(mc[5]));
    return std::vector<Tensor>{c1, x1};
  });
}

SingleBlock::SingleBlock(int64_t dim, int64_t heads, int64_t head_dim)
    : norm_(add_module<AdaNorm>("norm", dim, 3)),
      proj_mlp_(add_module<nn::Linear>("proj_mlp", dim, 4 * dim)),
      attn_(add_module<Attention>("attn", dim, heads, head_dim, /*joint=*/false)),
      proj_out_(add_module<nn::Linear>("proj_out", dim + 4 * dim, dim)) {}

std::vector<Tensor> SingleBlock::forward(const Tensor& hidden_states, const Tensor& encoder_hidden_states,
                                         const Tensor& temb, const Tensor& cos, const Tensor& sin) const {
  nn::TensorMap args{{"hidden_states", hidden_states}, {"encoder_hidden_states", encoder_hidden_states},
                     {"temb", temb}, {"cos", cos}, {"sin", sin}};
  return with_hooks(std::move(args), [&](const nn::TensorMap& in) {
    const Tensor& c = in.at("encoder_hidden_states");
    const int64_t text = c.size(1);
    Tensor h = cat({c, in.at("hidden_states")}, 1);
    auto m = norm_.forward(in.at("temb"));  // shift, scale, gate
    Tensor nh = k::layer_norm_modulate(h, over_tokens(m[1]), over_tokens(m[0]), kEps);
    Tensor mlp = k::gelu(proj_mlp_.forward(nh), /*tanh_approx=*/true);
    Tensor a = attn_.forward(nh, Tensor(), in.at("cos"), in.at("sin"))[0];
    k::add_mul_(h, proj_out_.forward(cat({a, mlp}, 2)), over_tokens(m[2]));  // h is this block's own copy
    return std::vector<Tensor>{h.narrow(1, 0, text), h.narrow(1, text, h.size(1) - text)};
  });
}

}  // namespace cpdit::models::flux
