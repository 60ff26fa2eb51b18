#pragma once
// Tensor: a dtype, a shape (up to 6-D), strides, and a shared storage. Views (reshape of a contiguous
// tensor, narrow, split) share storage; permute, cat and clone copy. Kernels take contiguous tensors;
// call contiguous() on a view that is not.
#include <cpdit/core/dtype.hpp>
#include <cpdit/core/memory.hpp>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace cpdit {

constexpr int kMaxDims = 6;
using Shape = std::vector<int64_t>;

std::string shape_string(const Shape& shape);  // "(2, 3, 4)"
int64_t shape_numel(const Shape& shape);

// Owned bytes (from the caching allocator, charged to a rank) or borrowed bytes kept alive by an
// owner handle (for example a memory-mapped file), which no counter sees until charge_to.
class Storage {
 public:
  static std::shared_ptr<Storage> allocate(size_t bytes);
  static std::shared_ptr<Storage> borrow(void* data, size_t bytes, std::shared_ptr<const void> owner);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  std::byte* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // Counts these bytes on `counter` from now on (and no longer on the counter charged before), so
  // that storage shared by many holders is counted once, where the caller says it belongs.
  void charge_to(MemoryCounter& counter);

 private:
  Storage() = default;
  std::byte* data_ = nullptr;
  size_t bytes_ = 0;
  bool owned_ = false;
  std::shared_ptr<MemoryCounter::Counts> charged_;
  std::shared_ptr<const void> owner_;
};

class Tensor {
 public:
  Tensor() = default;  // undefined tensor: defined() is false

  static Tensor empty(const Shape& shape, DType dtype = DType::f32);  // uninitialised
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32);
  static Tensor from_vector(const std::vector<float>& values, const Shape& shape);
  // A contiguous tensor over existing bytes; `owner` keeps them alive.
  static Tensor borrow(void* data, const Shape& shape, DType dtype, std::shared_ptr<const void> owner);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }  // in elements
  int dim() const { return int(shape_.size()); }
  int64_t size(int d) const;  // negative d counts from the end
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype_); }
  bool is_contiguous() const;
  bool same_storage(const Tensor& other) const { return storage_ == other.storage_; }
  std::string describe() const;  // "f32(2, 3, 4)"

  // Typed access to the first element; checks that T matches the dtype.
  template <class T>
  T* data() const;
  void* raw() const { return storage_ ? storage_->data() + offset_ : nullptr; }

  // Views.
  Tensor reshape(const Shape& shape) const;  // one dim may be -1; requires contiguous
  Tensor narrow(int dim, int64_t start, int64_t length) const;
  Tensor select(int dim, int64_t index) const;  // narrow to 1, then drop that dim

  // Copies.
  Tensor contiguous() const;  // self when already contiguous
  Tensor clone() const;
  Tensor to(DType dtype) const;  // self when already of that dtype and contiguous
  Tensor permute(const std::vector<int>& order) const;
  void copy_(const Tensor& src);  // same shape; any strides; converts dtypes
  void fill_(double value);
  // Storage::charge_to for the whole storage behind this tensor.
  void charge_to(MemoryCounter& counter) const;

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;  // bytes
  Shape shape_;
  Shape strides_;
  DType dtype_ = DType::f32;
};

// Split sizes of n over `parts` by the tensor_split rule: the first n mod parts chunks get one more.
std::vector<int64_t> split_sizes(int64_t n, int parts);
int64_t split_offset(int64_t n, int parts, int index);
// Views of `t` along `dim`, sizes as split_sizes (chunks may be empty).
std::vector<Tensor> split(const Tensor& t, int dim, int parts);
std::vector<Tensor> split(const Tensor& t, int dim, const std::vector<int64_t>& sizes);
Tensor cat(const std::vector<Tensor>& parts, int dim);

// Largest |a - b| over all elements (both converted to f32); shapes must match.
double max_abs_diff(const Tensor& a, const Tensor& b);

template <class T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::f32;
};
template <>
struct DTypeOf<bf16> {
  static constexpr DType value = DType::bf16;
};
template <>
struct DTypeOf<f16> {
  static constexpr DType value = DType::f16;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::i64;
};
template <>
struct DTypeOf<bool> {
  static constexpr DType value = DType::boolean;
};

void check_dtype(const Tensor& t, DType expected);  // throws naming both dtypes

template <class T>
T* Tensor::data() const {
  check_dtype(*this, DTypeOf<T>::value);
  return static_cast<T*>(raw());
}

}  // namespace cpdit
