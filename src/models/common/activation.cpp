#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/common/activation.hpp>

namespace cpdit::models::common {

Tensor activate(Activation activation, const Tensor& x) {
  switch (activation) {
    case Activation::silu:
      return kernels::silu(x);
    case Activation::gelu:
      return kernels::gelu(x, /*tanh_approx=*/false);
    case Activation::gelu_tanh:
      break;
  }
  return kernels::gelu(x, /*tanh_approx=*/true);
}

}  // namespace cpdit::models::common
