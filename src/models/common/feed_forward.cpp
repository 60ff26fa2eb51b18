#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/common/feed_forward.hpp>

namespace cpdit::models::common {

FeedForward::FeedForward(int64_t dim, int64_t hidden, Activation activation, bool gated, int64_t out)
    : net_(add_module<nn::Container>("net")),
      // net.0 is diffusers' GELU / GEGLU / SwiGLU module, which holds its Linear as "proj".
      proj_in_(net_.add_module<nn::Container>("0").add_module<nn::Linear>("proj", dim, gated ? 2 * hidden : hidden)),
      proj_out_(net_.add_module<nn::Linear>("2", hidden, out > 0 ? out : dim)),
      activation_(activation),
      gated_(gated) {}

Tensor FeedForward::forward(const Tensor& x) const {
  return with_hooks({{"hidden_states", x}}, [&](const nn::TensorMap& in) {
    const bool gelu = activation_ == Activation::gelu_tanh || activation_ == Activation::gelu;
    if (gelu && !gated_ && !proj_in_.has_hooks()) {
      // The hidden layer is the widest tensor of the block: bias and GELU in one pass over it, in place.
      Tensor h = kernels::linear(in.at("hidden_states"), proj_in_.weight());
      kernels::bias_gelu_(h, proj_in_.bias(), activation_ == Activation::gelu_tanh);
      return std::vector<Tensor>{proj_out_.forward(h)};
    }
    Tensor h = proj_in_.forward(in.at("hidden_states"));
    if (gated_) {
      const int64_t half = h.size(-1) / 2;
      h = kernels::mul(h.narrow(h.dim() - 1, 0, half), activate(activation_, h.narrow(h.dim() - 1, half, half)));
    } else {
      h = activate(activation_, h);
    }
    return std::vector<Tensor>{proj_out_.forward(h)};
  })[0];
}

}  // namespace cpdit::models::common
