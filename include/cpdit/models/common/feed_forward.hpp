#pragma once
// diffusers' FeedForward: net.0.proj (the activation's input projection), the activation, net.2.
#include <cpdit/models/common/activation.hpp>
#include <cpdit/nn/layers.hpp>

namespace cpdit::models::common {

// Plain (gated = false): net.2(act(net.0.proj(x))), net.0.proj D -> F ("gelu-approximate": FLUX.1, Wan,
// LTX, Qwen-Image). Gated: net.0.proj D -> 2F, cut into (hidden, gate) halves in that order,
// net.2(hidden * act(gate)): SwiGLU with Activation::silu, GEGLU with Activation::gelu. net.2 returns
// `out` channels (0: dim), as diffusers' dim_out (Wan's image embedder: image_dim in, the model width out).
class FeedForward : public nn::Module {
 public:
  FeedForward(int64_t dim, int64_t hidden, Activation activation, bool gated = false, int64_t out = 0);
  Tensor forward(const Tensor& x) const;
  // residual + forward(x) · gate as a new tensor, net.2's bias, the gate and the residual in one
  // pass over its product (projected_residual). With a hook on this module it runs as forward.
  Tensor forward_residual(const Tensor& residual, const Tensor& gate, const Tensor& x) const;

 private:
  Tensor hidden_layer(const Tensor& x) const;  // net.2's input: the activation of net.0.proj's output

  nn::Container& net_;
  nn::Linear& proj_in_;
  nn::Linear& proj_out_;
  Activation activation_;
  bool gated_;
};

// gelu(layer(x)), exact (erf) or tanh form: the layer's output is a block's widest tensor, so its bias
// and the GELU are one pass over it, in place, or for the tanh form none: the Linear's epilogue
// (unless a hook watches the layer's own output).
Tensor linear_gelu(const nn::Linear& layer, const Tensor& x, bool tanh_approx);

}  // namespace cpdit::models::common
