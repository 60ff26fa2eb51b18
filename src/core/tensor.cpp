#include <cpdit/core/error.hpp>
#include <cpdit/core/tensor.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <sstream>

namespace cpdit {

std::string shape_string(const Shape& shape) {
  std::ostringstream out;
  out << '(';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ')';
  return out.str();
}

int64_t shape_numel(const Shape& shape) {
  // An empty dim makes the count 0 however large the others are (a file may say (2^32, 2^32, 0)).
  for (int64_t d : shape)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : shape)
    CPDIT_CHECK(!__builtin_mul_overflow(n, d, &n), invalid_argument, "shape ", shape_string(shape),
                " has more elements than a 64-bit count holds");
  return n;
}

// ---- Storage ---------------------------------------------------------------------------------

std::shared_ptr<Storage> Storage::allocate(size_t bytes) {
  std::shared_ptr<Storage> s(new Storage());
  s->data_ = static_cast<std::byte*>(cpdit::allocate(bytes));
  s->bytes_ = bytes;
  s->owned_ = true;
  s->charged_ = current_memory_counter().counts();
  s->charged_->add(int64_t(bytes));
  return s;
}

std::shared_ptr<Storage> Storage::borrow(void* data, size_t bytes, std::shared_ptr<const void> owner) {
  std::shared_ptr<Storage> s(new Storage());
  s->data_ = static_cast<std::byte*>(data);
  s->bytes_ = bytes;
  s->owner_ = std::move(owner);
  return s;
}

void Storage::charge_to(MemoryCounter& counter) {
  // Ranks as threads bind one shared weight at the same time.
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  std::shared_ptr<MemoryCounter::Counts> counts = counter.counts();
  if (charged_ == counts) return;
  if (charged_) charged_->sub(int64_t(bytes_));
  counts->add(int64_t(bytes_));
  charged_ = std::move(counts);
}

Storage::~Storage() {
  if (charged_) charged_->sub(int64_t(bytes_));
  if (owned_) cpdit::deallocate(data_, bytes_);
}

// ---- Tensor ----------------------------------------------------------------------------------

namespace {

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (int i = int(shape.size()) - 1; i >= 0; --i) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

// numel x element size, refused when it does not fit a size_t (it would wrap to a small allocation
// that the tensor's users then write past).
size_t checked_nbytes(const Shape& shape, DType dtype) {
  size_t bytes = 0;
  CPDIT_CHECK(!__builtin_mul_overflow(size_t(shape_numel(shape)), dtype_size(dtype), &bytes), invalid_argument, "a ",
              dtype_name(dtype), " tensor of shape ", shape_string(shape), " needs more bytes than memory can address");
  return bytes;
}

void check_shape(const Shape& shape) {
  CPDIT_CHECK(shape.size() <= size_t(kMaxDims), invalid_argument, "tensors have at most ", kMaxDims,
              " dims, got ", shape_string(shape));
  for (int64_t d : shape)
    CPDIT_CHECK(d >= 0, invalid_argument, "negative dimension in shape ", shape_string(shape));
}

int normalise_dim(int dim, int ndim) {
  int d = dim < 0 ? dim + ndim : dim;
  CPDIT_CHECK(d >= 0 && d < ndim, invalid_argument, "dim ", dim, " out of range for a ", ndim, "-D tensor");
  return d;
}

// Visits every element of a (possibly strided) tensor in row-major order, calling
// fn(element_offset_in_elements, linear_index) for runs of the innermost dim.
template <class Fn>
void for_each_row(const Shape& shape, const Shape& strides, Fn fn) {
  int nd = int(shape.size());
  if (shape_numel(shape) == 0) return;
  if (nd == 0) {
    fn(int64_t(0), int64_t(0), int64_t(1), int64_t(1));
    return;
  }
  int64_t inner = shape[nd - 1], inner_stride = strides[nd - 1];
  int64_t rows = shape_numel(shape) / inner;
  std::vector<int64_t> idx(nd, 0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t off = 0;
    for (int d = 0; d < nd - 1; ++d) off += idx[d] * strides[d];
    fn(off, r * inner, inner, inner_stride);
    for (int d = nd - 2; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace

void check_dtype(const Tensor& t, DType expected) {
  CPDIT_CHECK(t.dtype() == expected, invalid_argument, "expected a ", dtype_name(expected), " tensor, got ",
              t.describe());
}

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  check_shape(shape);
  Tensor t;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dtype;
  t.storage_ = Storage::allocate(checked_nbytes(shape, dtype));
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  std::memset(t.raw(), 0, t.nbytes());
  return t;
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype) {
  Tensor t = empty(shape, dtype);
  t.fill_(value);
  return t;
}

Tensor Tensor::from_vector(const std::vector<float>& values, const Shape& shape) {
  CPDIT_CHECK(int64_t(values.size()) == shape_numel(shape), invalid_argument, values.size(),
              " values do not fill shape ", shape_string(shape));
  Tensor t = empty(shape, DType::f32);
  std::memcpy(t.raw(), values.data(), values.size() * sizeof(float));
  return t;
}

Tensor Tensor::borrow(void* data, const Shape& shape, DType dtype, std::shared_ptr<const void> owner) {
  check_shape(shape);
  Tensor t;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dtype;
  t.storage_ = Storage::borrow(data, checked_nbytes(shape, dtype), std::move(owner));
  return t;
}

int64_t Tensor::size(int d) const { return shape_[normalise_dim(d, dim())]; }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (int i = dim() - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

std::string Tensor::describe() const {
  if (!defined()) return "undefined tensor";
  return std::string(dtype_name(dtype_)) + shape_string(shape_);
}

Tensor Tensor::reshape(const Shape& shape) const {
  Shape resolved = shape;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < resolved.size(); ++i) {
    if (resolved[i] == -1) {
      CPDIT_CHECK(infer < 0, invalid_argument, "reshape ", shape_string(shape), ": only one dim may be -1");
      infer = int(i);
    } else {
      known *= resolved[i];
    }
  }
  if (infer >= 0) {
    CPDIT_CHECK(known != 0 && numel() % known == 0, invalid_argument, "cannot reshape ", describe(), " to ",
                shape_string(shape));
    resolved[infer] = numel() / known;
  }
  check_shape(resolved);
  CPDIT_CHECK(shape_numel(resolved) == numel(), invalid_argument, "cannot reshape ", describe(), " to ",
              shape_string(shape));
  if (!is_contiguous()) return contiguous().reshape(resolved);
  Tensor t = *this;
  t.shape_ = resolved;
  t.strides_ = contiguous_strides(resolved);
  return t;
}

Tensor Tensor::narrow(int dim_, int64_t start, int64_t length) const {
  int d = normalise_dim(dim_, dim());
  CPDIT_CHECK(start >= 0 && length >= 0 && start + length <= shape_[d], invalid_argument, "narrow(dim ", d,
              ", start ", start, ", length ", length, ") out of range for ", describe());
  Tensor t = *this;
  t.shape_[d] = length;
  if (length > 0) t.offset_ += size_t(start * strides_[d]) * dtype_size(dtype_);
  return t;
}

Tensor Tensor::select(int dim_, int64_t index) const {
  int d = normalise_dim(dim_, dim());
  Tensor t = narrow(d, index, 1);
  t.shape_.erase(t.shape_.begin() + d);
  t.strides_.erase(t.strides_.begin() + d);
  return t;
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_);
  t.copy_(*this);
  return t;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_ && is_contiguous()) return *this;
  Tensor t = empty(shape_, dtype);
  t.copy_(*this);
  return t;
}

Tensor Tensor::permute(const std::vector<int>& order) const {
  CPDIT_CHECK(int(order.size()) == dim(), invalid_argument, "permute needs ", dim(), " dims, got ", order.size());
  Shape shape(order.size()), strides(order.size());
  std::vector<bool> seen(order.size(), false);
  for (size_t i = 0; i < order.size(); ++i) {
    int d = normalise_dim(order[i], dim());
    CPDIT_CHECK(!seen[d], invalid_argument, "permute: dim ", d, " repeated");
    seen[d] = true;
    shape[i] = shape_[d];
    strides[i] = strides_[d];
  }
  Tensor view = *this;
  view.shape_ = shape;
  view.strides_ = strides;
  return view.clone();
}

void Tensor::copy_(const Tensor& src) {
  CPDIT_CHECK(src.shape_ == shape_, invalid_argument, "copy_: shape ", src.describe(), " into ", describe());
  size_t in_size = dtype_size(src.dtype_), out_size = dtype_size(dtype_);
  if (src.is_contiguous() && is_contiguous()) {
    convert(src.raw(), src.dtype_, raw(), dtype_, size_t(numel()));
    return;
  }
  // Walk the destination row by row; gather each source row into a contiguous buffer if needed.
  std::vector<std::byte> row_in, row_out;
  const Shape& in_strides = src.strides_;
  int nd = dim();
  std::vector<int64_t> idx(std::max(nd - 1, 0), 0);
  for_each_row(shape_, strides_, [&](int64_t out_off, int64_t, int64_t n, int64_t out_stride) {
    int64_t in_off = 0;
    for (int d = 0; d < nd - 1; ++d) in_off += idx[d] * in_strides[d];
    for (int d = nd - 2; d >= 0; --d) {
      if (++idx[d] < shape_[d]) break;
      idx[d] = 0;
    }
    int64_t in_stride = nd ? in_strides[nd - 1] : 1;
    const std::byte* in = static_cast<const std::byte*>(src.raw()) + in_off * int64_t(in_size);
    std::byte* out = static_cast<std::byte*>(raw()) + out_off * int64_t(out_size);
    if (in_stride != 1) {
      row_in.resize(size_t(n) * in_size);
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(&row_in[size_t(i) * in_size], in + i * in_stride * int64_t(in_size), in_size);
      in = row_in.data();
    }
    if (out_stride == 1) {
      convert(in, src.dtype_, out, dtype_, size_t(n));
    } else {
      row_out.resize(size_t(n) * out_size);
      convert(in, src.dtype_, row_out.data(), dtype_, size_t(n));
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(out + i * out_stride * int64_t(out_size), &row_out[size_t(i) * out_size], out_size);
    }
  });
}

void Tensor::fill_(double value) {
  std::vector<std::byte> pattern(dtype_size(dtype_));
  if (dtype_ == DType::i64) {
    int64_t v = int64_t(value);
    std::memcpy(pattern.data(), &v, 8);
  } else {
    float v = float(value);
    convert(&v, DType::f32, pattern.data(), dtype_, 1);
  }
  for_each_row(shape_, strides_, [&](int64_t off, int64_t, int64_t n, int64_t stride) {
    std::byte* p = static_cast<std::byte*>(raw()) + off * int64_t(pattern.size());
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(p + i * stride * int64_t(pattern.size()), pattern.data(), pattern.size());
  });
}

void Tensor::charge_to(MemoryCounter& counter) const {
  if (storage_) storage_->charge_to(counter);
}

// ---- splitting and joining -------------------------------------------------------------------

std::vector<int64_t> split_sizes(int64_t n, int parts) {
  CPDIT_CHECK(parts >= 1, invalid_argument, "cannot split into ", parts, " parts");
  std::vector<int64_t> sizes(size_t(parts), n / parts);
  for (int64_t i = 0; i < n % parts; ++i) sizes[size_t(i)] += 1;
  return sizes;
}

int64_t split_offset(int64_t n, int parts, int index) {
  int64_t q = n / parts, m = n % parts;
  return index * q + std::min<int64_t>(index, m);
}

std::vector<Tensor> split(const Tensor& t, int dim, int parts) {
  return split(t, dim, split_sizes(t.size(dim), parts));
}

std::vector<Tensor> split(const Tensor& t, int dim, const std::vector<int64_t>& sizes) {
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  CPDIT_CHECK(total == t.size(dim), invalid_argument, "split sizes sum to ", total, " but dim ", dim, " of ",
              t.describe(), " has ", t.size(dim));
  std::vector<Tensor> out;
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(t.narrow(dim, start, s));
    start += s;
  }
  return out;
}

Tensor cat(const std::vector<Tensor>& parts, int dim) {
  CPDIT_CHECK(!parts.empty(), invalid_argument, "cat of no tensors");
  const Tensor& first = parts[0];
  int d = normalise_dim(dim, first.dim());
  Shape shape = first.shape();
  shape[d] = 0;
  for (const Tensor& p : parts) {
    CPDIT_CHECK(p.dim() == first.dim() && p.dtype() == first.dtype(), invalid_argument, "cat: ", p.describe(),
                " does not match ", first.describe());
    for (int i = 0; i < first.dim(); ++i)
      CPDIT_CHECK(i == d || p.size(i) == first.size(i), invalid_argument, "cat along dim ", d, ": ",
                  p.describe(), " does not match ", first.describe());
    shape[d] += p.size(d);
  }
  Tensor out = Tensor::empty(shape, first.dtype());
  int64_t start = 0;
  for (const Tensor& p : parts) {
    out.narrow(d, start, p.size(d)).copy_(p);
    start += p.size(d);
  }
  return out;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  CPDIT_CHECK(a.shape() == b.shape(), invalid_argument, "max_abs_diff: ", a.describe(), " vs ", b.describe());
  Tensor x = a.to(DType::f32), y = b.to(DType::f32);
  const float* p = x.data<float>();
  const float* q = y.data<float>();
  double worst = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    double d = std::fabs(double(p[i]) - double(q[i]));
    if (std::isnan(d)) return d;
    worst = std::max(worst, d);
  }
  return worst;
}

}  // namespace cpdit
