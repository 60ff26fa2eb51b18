#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/common/adaptive_norm.hpp>
#include <cpdit/models/common/feed_forward.hpp>

namespace cpdit::models::common {

Tensor linear_gelu(const nn::Linear& layer, const Tensor& x, bool tanh_approx) {
  if (layer.has_hooks()) return kernels::gelu(layer.forward(x), tanh_approx);
  // The tanh form is the Linear's epilogue (on the AMX kernel's tiles as it writes them); a LoRA delta
  // adds to the product before the bias and GELU pass.
  if (tanh_approx && layer.plain())
    return kernels::linear(x, layer.weight(), layer.bias(), kernels::Epilogue::gelu_tanh);
  Tensor h = kernels::linear(x, layer.weight());
  layer.add_delta_({x}, h);
  kernels::bias_gelu_(h, layer.bias(), tanh_approx);
  return h;
}

FeedForward::FeedForward(int64_t dim, int64_t hidden, Activation activation, bool gated, int64_t out)
    : net_(add_module<nn::Container>("net")),
      // net.0 is diffusers' GELU / GEGLU / SwiGLU module, which holds its Linear as "proj".
      proj_in_(net_.add_module<nn::Container>("0").add_module<nn::Linear>("proj", dim, gated ? 2 * hidden : hidden)),
      proj_out_(net_.add_module<nn::Linear>("2", hidden, out > 0 ? out : dim)),
      activation_(activation),
      gated_(gated) {}

Tensor FeedForward::forward(const Tensor& x) const {
  return with_hooks({{"hidden_states", x}}, [&](const nn::TensorMap& in) {
    return std::vector<Tensor>{proj_out_.forward(hidden_layer(in.at("hidden_states")))};
  })[0];
}

Tensor FeedForward::forward_residual(const Tensor& residual, const Tensor& gate, const Tensor& x) const {
  if (has_hooks()) return gated_residual(residual, forward(x), gate);  // the hooks must see this module's output
  return projected_residual(residual, proj_out_, {hidden_layer(x)}, gate);
}

Tensor FeedForward::hidden_layer(const Tensor& x) const {
  const bool gelu = activation_ == Activation::gelu_tanh || activation_ == Activation::gelu;
  // The hidden layer is the widest tensor of the block: bias and GELU in one pass over it, in place.
  if (gelu && !gated_) return linear_gelu(proj_in_, x, activation_ == Activation::gelu_tanh);
  Tensor h = proj_in_.forward(x);
  if (!gated_) return activate(activation_, h);
  const int64_t half = h.size(-1) / 2;
  return kernels::mul(h.narrow(h.dim() - 1, 0, half), activate(activation_, h.narrow(h.dim() - 1, half, half)));
}

}  // namespace cpdit::models::common
