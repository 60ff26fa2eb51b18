#include <cpdit/kernels/cpu.hpp>
#include <cpdit/nn/layers.hpp>

namespace cpdit::nn {

namespace {
// Norm and bias vectors are dense (quantised formats hold matrices).
Tensor value_or_none(const Parameter* p) { return p ? p->value.values("a norm or bias") : Tensor(); }

}  // namespace

Linear::Linear(int64_t in_features, int64_t out_features, bool bias)
    : weight_(add_parameter("weight", {out_features, in_features}, /*matrix=*/true)) {
  if (bias) bias_ = &add_parameter("bias", {out_features});
}

Tensor Linear::forward(const Tensor& x) const {
  return with_hooks({{"input", x}}, [&](const TensorMap& in) {
    return std::vector<Tensor>{kernels::linear(in.at("input"), weight_.value, bias())};
  })[0];
}

Tensor Linear::bias() const { return value_or_none(bias_); }

RMSNorm::RMSNorm(int64_t dim, float eps) : weight_(add_parameter("weight", {dim})), eps_(eps) {}

Tensor RMSNorm::forward(const Tensor& x) const {
  return with_hooks({{"input", x}}, [&](const TensorMap& in) {
    return std::vector<Tensor>{kernels::rms_norm(in.at("input"), weight(), eps_)};
  })[0];
}

Tensor RMSNorm::weight() const { return value_or_none(&weight_); }

LayerNorm::LayerNorm(int64_t dim, float eps, bool affine) : eps_(eps) {
  if (affine) {
    weight_ = &add_parameter("weight", {dim});
    bias_ = &add_parameter("bias", {dim});
  }
}

Tensor LayerNorm::forward(const Tensor& x) const {
  return with_hooks({{"input", x}}, [&](const TensorMap& in) {
    return std::vector<Tensor>{
        kernels::layer_norm(in.at("input"), value_or_none(weight_), value_or_none(bias_), eps_)};
  })[0];
}

}  // namespace cpdit::nn
