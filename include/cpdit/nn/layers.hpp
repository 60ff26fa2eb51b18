#pragma once
// The common layers, named and shaped as PyTorch names and shapes them, so checkpoint keys bind
// directly ("<path>.weight", "<path>.bias"). Each forward runs through the module's hooks; its
// single tensor argument is named "input" (nn.Linear's and nn.LayerNorm's parameter name).
#include <cpdit/nn/module.hpp>

namespace cpdit::nn {

// A low-rank update of a Linear's weight, W + up·down (LoRA adapters, nn/lora.hpp), kept apart from
// W so that W stays as loaded (mapped, bf16, quantised). down (rank, in) and up (out, rank) f32, the
// adapters' scales already in up; several adapters are one delta of their ranks side by side.
struct LowRankDelta {
  Tensor down, up;
};

// y = x W^T + b (+ (x down^T) up^T with a low-rank delta); weight [out, in], bias [out].
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) const;
  int64_t in_features() const { return weight_.shape[1]; }
  int64_t out_features() const { return weight_.shape[0]; }
  // For callers that add the bias in a pass of their own (fused with what follows the layer).
  const Weight& weight() const { return weight_.value; }
  Tensor bias() const;  // undefined without one
  // Adds the delta's product to every output from now on; an undefined delta removes it.
  void set_delta(LowRankDelta delta);
  // Whether kernels::linear(x, weight(), bias()) is the whole layer: no hook expects to see it run and
  // no delta adds to it.
  bool plain() const { return !has_hooks() && !delta_.down.defined(); }
  // For a caller that runs the layer's product in a pass of its own (no hooks): adds the delta's product
  // for the input `parts` (side by side along the last dim, as kernels::linear_cat takes them) to the
  // f32 product `y` in place, before the caller's bias, activation or residual; nothing without a delta.
  void add_delta_(const std::vector<Tensor>& parts, Tensor& y) const;

 private:
  Parameter& weight_;
  Parameter* bias_ = nullptr;
  LowRankDelta delta_;
};

// x / sqrt(mean(x^2) + eps) * weight over the last dim; weight [dim].
class RMSNorm : public Module {
 public:
  RMSNorm(int64_t dim, float eps);
  Tensor forward(const Tensor& x) const;
  Tensor weight() const;
  float eps() const { return eps_; }

 private:
  Parameter& weight_;
  float eps_;
};

// LayerNorm over the last dim, with or without affine weight and bias [dim].
class LayerNorm : public Module {
 public:
  LayerNorm(int64_t dim, float eps, bool affine);
  Tensor forward(const Tensor& x) const;

 private:
  Parameter* weight_ = nullptr;
  Parameter* bias_ = nullptr;
  float eps_;
};

}  // namespace cpdit::nn
