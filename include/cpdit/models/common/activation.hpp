#pragma once
// The activations of the DiT MLPs, by the names diffusers' configs use for them.
#include <cpdit/core/tensor.hpp>

namespace cpdit::models::common {

enum class Activation {
  silu,       // "silu"
  gelu,       // "gelu": the exact erf form
  gelu_tanh,  // "gelu-approximate", "gelu_tanh": the tanh approximation
};

Tensor activate(Activation activation, const Tensor& x);

}  // namespace cpdit::models::common
