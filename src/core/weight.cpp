#include <cpdit/core/block_format.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/core/weight.hpp>

#include <algorithm>

namespace cpdit {

Weight::Weight(Tensor values) : shape_(values.shape()), data_(std::move(values)) {}

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

Weight Weight::blocks(const Shape& shape, const std::string& format, Tensor blocks) {
  const BlockFormat* f = find_block_format(format);
  CPDIT_CHECK(f != nullptr, unsupported, "no block format named ", format);
  CPDIT_CHECK(shape.size() == 2 && shape[1] % f->block_size == 0, invalid_argument, format, " weight ",
              shape_string(shape), ": needs 2 dims and a last dim divisible by the block size ", f->block_size);
  const Shape bytes = {shape[0], shape[1] / f->block_size * f->block_bytes};
  CPDIT_CHECK(blocks.defined() && blocks.dtype() == DType::boolean && blocks.shape() == bytes, invalid_argument,
              format, " weight ", shape_string(shape), ": needs its blocks as bytes ", shape_string(bytes), ", got ",
              blocks.defined() ? blocks.describe() : "undefined");
  Weight w;
  w.shape_ = shape;
  w.data_ = std::move(blocks);
  w.quant_ = {format, f->block_size, Tensor()};
  return w;
}

Weight Weight::scaled(float scale) const {
  // GGUF's blocks carry their own scales; only FP8 matrices are stored with one beside them.
  CPDIT_CHECK(format() == "F8_E4M3" || format() == "F8_E5M2", invalid_argument,
              "a weight scale applies to an FP8 matrix, not to ", describe());
  Weight w = *this;
  w.quant_.scale = scale;
  return w;
}

Weight Weight::narrow_rows(int64_t start, int64_t length) const {
  if (!is_quantised()) return Weight(data_.narrow(0, start, length));
  Weight w = *this;
  w.data_ = data_.narrow(0, start, length);
  if (quant_.scales.defined()) w.quant_.scales = quant_.scales.narrow(0, start, length);
  w.shape_[0] = length;
  return w;
}

Weight Weight::cat_rows(const std::vector<Weight>& parts) {
  CPDIT_CHECK(!parts.empty(), invalid_argument, "cat_rows needs at least one weight");
  const Weight& first = parts[0];
  std::vector<Tensor> data, scales;
  int64_t rows = 0;
  for (const Weight& p : parts) {
    CPDIT_CHECK(p.format() == first.format() && p.quant_.scale == first.quant_.scale &&
                    p.shape_.size() == first.shape_.size() &&
                    std::equal(p.shape_.begin() + 1, p.shape_.end(), first.shape_.begin() + 1),
                invalid_argument, "cat_rows: ", p.describe(), " does not match ", first.describe());
    data.push_back(p.data_);
    if (p.quant_.scales.defined()) scales.push_back(p.quant_.scales);
    rows += p.shape_[0];
  }
  if (!first.is_quantised()) return Weight(cat(data, 0));
  Weight w = first;
  w.shape_[0] = rows;
  w.data_ = cat(data, 0);
  if (!scales.empty()) w.quant_.scales = cat(scales, 0);
  return w;
}

std::string Weight::format() const { return is_quantised() ? quant_.format : dtype_name(dtype()); }

std::string Weight::describe() const {
  if (!defined()) return "undefined weight";
  return format() + shape_string(shape_) + (quant_.scale != 1.0f ? " x " + std::to_string(quant_.scale) : "");
}

size_t Weight::nbytes() const { return data_.nbytes() + (quant_.scales.defined() ? quant_.scales.nbytes() : 0); }

const Tensor& Weight::values(const char* user) const {
  CPDIT_CHECK(!is_quantised(), unsupported, user, " computes with dense f32, bf16 or f16 weights, not ",
              describe());
  return data_;
}

void Weight::charge_to(MemoryCounter& counter) const {
  data_.charge_to(counter);
  if (quant_.scales.defined()) quant_.scales.charge_to(counter);
}

MemoryCounter& weight_memory_counter() {
  static MemoryCounter counter;
  return counter;
}

}  // namespace cpdit
