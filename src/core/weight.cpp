#include <cpdit/core/error.hpp>
#include <cpdit/core/weight.hpp>

namespace cpdit {

Weight::Weight(Tensor values) : shape_(values.shape()), data_(std::move(values)) {
  if (!data_.defined()) return;
  const DType t = data_.dtype();
  CPDIT_CHECK(t == DType::f32 || t == DType::bf16 || t == DType::f16, invalid_argument,
              "a dense weight is f32, bf16 or f16, got ", data_.describe());
}

Weight Weight::quantised(const Shape& shape, Tensor codes, BlockQuantisation q) {
  CPDIT_CHECK(!q.format.empty(), invalid_argument, "a quantised weight needs its format's name");
  CPDIT_CHECK(shape.size() == 2 && q.block_size > 0 && shape[1] % q.block_size == 0, invalid_argument, q.format,
              " weight ", shape_string(shape), ": needs 2 dims and a last dim divisible by the block size ",
              q.block_size);
  CPDIT_CHECK(codes.defined() && q.scales.defined() &&
                  q.scales.shape() == Shape({shape[0], shape[1] / q.block_size}),
              invalid_argument, q.format, " weight ", shape_string(shape), ": needs codes and scales ",
              shape_string({shape[0], shape[1] / q.block_size}), ", got scales ",
              q.scales.defined() ? q.scales.describe() : "undefined");
  Weight w;
  w.shape_ = shape;
  w.data_ = std::move(codes);
  w.quant_ = std::move(q);
  return w;
}

std::string Weight::format() const { return is_quantised() ? quant_.format : dtype_name(dtype()); }

std::string Weight::describe() const { return defined() ? format() + shape_string(shape_) : "undefined weight"; }

size_t Weight::nbytes() const { return data_.nbytes() + (is_quantised() ? quant_.scales.nbytes() : 0); }

const Tensor& Weight::values(const char* user) const {
  CPDIT_CHECK(!is_quantised(), unsupported, user, " computes with dense f32, bf16 or f16 weights, not ",
              describe());
  return data_;
}

void Weight::charge_to(MemoryCounter& counter) const {
  data_.charge_to(counter);
  if (is_quantised()) quant_.scales.charge_to(counter);
}

MemoryCounter& weight_memory_counter() {
  static MemoryCounter counter;
  return counter;
}

}  // namespace cpdit
