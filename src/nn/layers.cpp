#include <cpdit/core/error.hpp>
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
    const Tensor& input = in.at("input");
    Tensor y = kernels::linear(input, weight_.value, bias());
    add_delta_({input}, y);
    return std::vector<Tensor>{y};
  })[0];
}

void Linear::add_delta_(const std::vector<Tensor>& parts, Tensor& y) const {
  if (!delta_.down.defined()) return;
  const Tensor low = parts.size() == 1 ? kernels::linear(parts[0], delta_.down) : kernels::linear_cat(parts, delta_.down);
  kernels::add_(y, kernels::linear(low, delta_.up));
}

void Linear::set_delta(LowRankDelta delta) {
  if (delta.down.defined()) {
    const Shape& d = delta.down.shape();
    const Shape& u = delta.up.shape();
    CPDIT_CHECK(delta.down.dtype() == DType::f32 && delta.up.dtype() == DType::f32 && d.size() == 2 &&
                    u.size() == 2 && d[0] == u[1] && d[1] == in_features() && u[0] == out_features(),
                invalid_argument, "a low-rank delta of a Linear(", in_features(), ", ", out_features(),
                ") must be f32 down (rank, ", in_features(), ") and up (", out_features(), ", rank), got ",
                delta.down.describe(), " and ", delta.up.describe());
  }
  delta_ = std::move(delta);
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
