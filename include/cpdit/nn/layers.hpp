#pragma once
// The common layers, named and shaped as PyTorch names and shapes them, so checkpoint keys bind
// directly ("<path>.weight", "<path>.bias"). Each forward runs through the module's hooks; its
// single tensor argument is named "input" (nn.Linear's and nn.LayerNorm's parameter name).
#include <cpdit/nn/module.hpp>

namespace cpdit::nn {

// y = x W^T + b; weight [out, in], bias [out].
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) const;
  int64_t in_features() const { return weight_.shape[1]; }
  int64_t out_features() const { return weight_.shape[0]; }
  // For callers that add the bias in a pass of their own (fused with what follows the layer).
  const Weight& weight() const { return weight_.value; }
  Tensor bias() const;  // undefined without one

 private:
  Parameter& weight_;
  Parameter* bias_ = nullptr;
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
