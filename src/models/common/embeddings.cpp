#include <cpdit/core/error.hpp>
#include <cpdit/models/common/embeddings.hpp>

#include <cmath>

namespace cpdit::models::common {

namespace {
// t (B,) as contiguous f32 (integer timesteps up to 2^24 are exact in it), with an even embedding width.
Tensor checked_timesteps(const Tensor& t, int64_t channels) {
  Tensor ts = t.to(DType::f32).contiguous();
  CPDIT_CHECK(ts.dim() == 1, invalid_argument, "timestep must be (B,), got ", ts.describe());
  CPDIT_CHECK(channels >= 2 && channels % 2 == 0, invalid_argument, "timestep embedding width must be even, got ",
              channels);
  return ts;
}
}  // namespace

Tensor timestep_sinusoid(const Tensor& t, int64_t channels, const SinusoidOptions& options) {
  const Tensor ts = checked_timesteps(t, channels);
  const int64_t batch = ts.size(0), half = channels / 2;
  Tensor out = Tensor::empty({batch, channels});
  const float* tv = ts.data<float>();
  float* o = out.data<float>();
  // float32 at every step, as diffusers' get_timestep_embedding: exponent = -ln(10000)·j / (half - shift),
  // freq = exp(exponent), argument = scale·(t·freq).
  const float neg_log_period = float(-std::log(10000.0));
  const float denominator = float(half) - options.downscale_freq_shift;
  const int64_t cos_at = options.flip_sin_to_cos ? 0 : half, sin_at = half - cos_at;
  for (int64_t j = 0; j < half; ++j) {
    const float exponent = (neg_log_period * float(j)) / denominator;
    const float freq = float(std::exp(double(exponent)));
    for (int64_t b = 0; b < batch; ++b) {
      float arg = tv[b] * freq;
      if (options.scale != 1.0f) arg = options.scale * arg;
      o[b * channels + cos_at + j] = float(std::cos(double(arg)));
      o[b * channels + sin_at + j] = float(std::sin(double(arg)));
    }
  }
  return out;
}

Tensor timestep_sinusoid_f64(const Tensor& t, int64_t channels) {
  const Tensor ts = checked_timesteps(t, channels);
  const int64_t batch = ts.size(0), half = channels / 2;
  Tensor out = Tensor::empty({batch, channels});
  const float* tv = ts.data<float>();
  float* o = out.data<float>();
  for (int64_t j = 0; j < half; ++j) {
    const double omega = 1.0 / std::pow(10000.0, double(j) / double(half));
    for (int64_t b = 0; b < batch; ++b) {
      const double arg = double(tv[b]) * omega;
      o[b * channels + j] = float(std::cos(arg));
      o[b * channels + half + j] = float(std::sin(arg));
    }
  }
  return out;
}

MlpEmbedder::MlpEmbedder(int64_t in, int64_t hidden, Activation activation, int64_t out)
    : linear_1_(add_module<nn::Linear>("linear_1", in, hidden)),
      linear_2_(add_module<nn::Linear>("linear_2", hidden, out > 0 ? out : hidden)),
      activation_(activation) {}

Tensor MlpEmbedder::forward(const Tensor& x) const {
  return with_hooks({{"input", x}}, [&](const nn::TensorMap& in) {
    return std::vector<Tensor>{linear_2_.forward(activate(activation_, linear_1_.forward(in.at("input"))))};
  })[0];
}

}  // namespace cpdit::models::common
