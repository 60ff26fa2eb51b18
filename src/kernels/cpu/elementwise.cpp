// Binary elementwise kernels with one-sided broadcasting of the second operand (see cpu.hpp).
#include "kernels/cpu/checks.hpp"

#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/cpu.hpp>

#include <optional>
#include <vector>

namespace cpdit::kernels {

namespace {

// Where b's element for each element of a lies: a's rows (last dim) are walked in order; b's offset
// for a row comes from its per-dim strides (0 on a broadcast dim), b's stride within the row is 0
// or 1.
class Broadcast {
 public:
  Broadcast(const Tensor& a, const Tensor& b, const char* kernel) {
    CPDIT_CHECK(b.dim() <= a.dim(), invalid_argument, kernel, ": cannot broadcast ", b.describe(), " to ",
                a.describe(), " (b may have fewer dims than a, not more)");
    const int nd = a.dim(), shift = a.dim() - b.dim();
    strides_.assign(size_t(nd), 0);
    int64_t stride = 1;
    for (int d = nd - 1; d >= shift; --d) {
      const int64_t size = b.shape()[size_t(d - shift)];
      CPDIT_CHECK(size == a.shape()[size_t(d)] || size == 1, invalid_argument, kernel, ": cannot broadcast ",
                  b.describe(), " to ", a.describe(), " (each dim of b, aligned right, must match a's or be 1)");
      strides_[size_t(d)] = size == 1 ? 0 : stride;
      stride *= size;
    }
    sizes_ = a.shape();
    row_ = nd == 0 ? 1 : sizes_.back();
    same_shape_ = a.shape() == b.shape();
  }
  int64_t row_length() const { return row_; }
  int64_t inner_stride() const { return strides_.empty() ? 0 : strides_.back(); }
  int64_t row_offset(int64_t row) const {
    if (same_shape_) return row * row_;
    int64_t offset = 0;
    for (int d = int(sizes_.size()) - 2; d >= 0; --d) {
      offset += (row % sizes_[size_t(d)]) * strides_[size_t(d)];
      row /= sizes_[size_t(d)];
    }
    return offset;
  }

 private:
  Shape sizes_;
  std::vector<int64_t> strides_;
  int64_t row_ = 1;
  bool same_shape_ = false;
};

// out[i] = fn(a[i], b[broadcast i]); out may be a itself.
template <class Fn>
void binary(const float* a, const float* b, float* out, const Broadcast& bc, int64_t numel, Fn fn) {
  const int64_t n = bc.row_length(), rows = n == 0 ? 0 : numel / n, step = bc.inner_stride();
#pragma omp parallel for num_threads(compute_threads()) if (numel >= detail::kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float* ar = a + r * n;
    const float* br = b + bc.row_offset(r);
    float* o = out + r * n;
    if (step == 1) {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) o[j] = fn(ar[j], br[j]);
    } else {
      const float bv = br[0];
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) o[j] = fn(ar[j], bv);
    }
  }
}

template <class Fn>
Tensor binary_out_of_place(const Tensor& a_in, const Tensor& b_in, const char* kernel, Fn fn) {
  Tensor a = detail::f32_input(a_in, kernel, "a");
  Tensor b = detail::f32_input(b_in, kernel, "b");
  Broadcast bc(a, b, kernel);
  Tensor out = Tensor::empty(a.shape());
  binary(a.data<float>(), b.data<float>(), out.data<float>(), bc, a.numel(), fn);
  return out;
}

void check_in_place(const Tensor& a, const char* kernel) {
  CPDIT_CHECK(a.defined() && a.dtype() == DType::f32 && a.is_contiguous(), invalid_argument, kernel,
              ": destination must be a contiguous f32 tensor, got ", a.defined() ? a.describe() : "undefined",
              " (call contiguous() first)");
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  return binary_out_of_place(a, b, "add", [](float x, float y) { return x + y; });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  return binary_out_of_place(a, b, "mul", [](float x, float y) { return x * y; });
}

void add_(Tensor& a, const Tensor& b_in) {
  check_in_place(a, "add_");
  Tensor b = detail::f32_input(b_in, "add_", "b");
  Broadcast bc(a, b, "add_");
  float* dst = a.data<float>();
  binary(dst, b.data<float>(), dst, bc, a.numel(), [](float x, float y) { return x + y; });
}

namespace {

enum class Gate { none, per_element, per_row };  // per_row: one gate value for a whole row

// out = x + (y + bias) gate for one row of n values (bias null: none; gate as kGate). out may be x or y.
template <bool kBias, Gate kGate>
void residual_row(float* out, const float* x, const float* y, const float* bias, const float* gate, int64_t n) {
  [[maybe_unused]] const float g0 = kGate == Gate::per_row ? gate[0] : 1.0f;
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    const float branch = kBias ? y[j] + bias[j] : y[j];
    if constexpr (kGate == Gate::none) out[j] = x[j] + branch;
    else if constexpr (kGate == Gate::per_row) out[j] = x[j] + branch * g0;
    else out[j] = x[j] + branch * gate[j];
  }
}

// The gated residual of a block's branch over rows of x's shape: out = x + (y + bias) gate, with the
// gate (when defined) broadcast to x as `bc` says. One pass; out may be x (the residual stream
// updated in place) or y (a product that ran without its bias, finished where it lies).
template <bool kBias>
void residual_rows(float* out, const float* x, const float* y, const float* bias, const float* gate,
                   const Broadcast* bc, int64_t numel, int64_t n) {
  const int64_t rows = n == 0 ? 0 : numel / n;
  const bool per_row = gate && bc->inner_stride() == 0;
#pragma omp parallel for num_threads(compute_threads()) if (numel >= detail::kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    float* o = out + r * n;
    const float *xr = x + r * n, *yr = y + r * n;
    if (!gate) residual_row<kBias, Gate::none>(o, xr, yr, bias, nullptr, n);
    else if (per_row) residual_row<kBias, Gate::per_row>(o, xr, yr, bias, gate + bc->row_offset(r), n);
    else residual_row<kBias, Gate::per_element>(o, xr, yr, bias, gate + bc->row_offset(r), n);
  }
}

}  // namespace

void add_mul_(Tensor& a, const Tensor& b_in, const Tensor& gate_in) {
  check_in_place(a, "add_mul_");
  Tensor b = detail::f32_input(b_in, "add_mul_", "b");
  Tensor gate = detail::f32_input(gate_in, "add_mul_", "gate");
  CPDIT_CHECK(b.shape() == a.shape(), invalid_argument, "add_mul_: b ", b.describe(), " must have the shape of a ",
              a.describe());
  Broadcast bc(a, gate, "add_mul_");
  residual_rows<false>(a.data<float>(), a.data<float>(), b.data<float>(), nullptr, gate.data<float>(), &bc, a.numel(),
                       bc.row_length());
}

void bias_residual_(Tensor& y, const Tensor& x_in, const Tensor& bias_in, const Tensor& gate_in) {
  const char* kernel = "bias_residual_";
  check_in_place(y, kernel);
  Tensor x = detail::f32_input(x_in, kernel, "x");
  CPDIT_CHECK(x.shape() == y.shape(), invalid_argument, kernel, ": x ", x.describe(), " must have the shape of y ",
              y.describe());
  const int64_t n = y.dim() == 0 ? 1 : y.size(-1);
  const Tensor bias = detail::optional_vector(bias_in, n, kernel, "bias");
  std::optional<Broadcast> bc;
  Tensor gate;
  if (gate_in.defined()) {
    gate = detail::f32_input(gate_in, kernel, "gate");
    bc.emplace(y, gate, kernel);
  }
  const float* g = gate.defined() ? gate.data<float>() : nullptr;
  float* out = y.data<float>();
  if (bias.defined())
    residual_rows<true>(out, x.data<float>(), out, bias.data<float>(), g, bc ? &*bc : nullptr, y.numel(), n);
  else
    residual_rows<false>(out, x.data<float>(), out, nullptr, g, bc ? &*bc : nullptr, y.numel(), n);
}

}  // namespace cpdit::kernels
