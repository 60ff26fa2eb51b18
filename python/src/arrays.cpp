#include "arrays.hpp"

#include <cpdit/core/error.hpp>

#include <string>

namespace py = pybind11;

namespace cpdit::python {
namespace {

DType dtype_of(const py::array& array, const char* name) {
  const py::dtype d = array.dtype();
  if (d.is(py::dtype::of<float>())) return DType::f32;
  if (d.is(py::dtype::of<int64_t>())) return DType::i64;
  if (d.is(py::dtype::of<bool>())) return DType::boolean;
  if (d.kind() == 'f' && d.itemsize() == 2) return DType::f16;
  fail(ErrorKind::invalid_argument, name, ": arrays of dtype ", py::cast<std::string>(d.attr("name")),
       " are not supported (float32, float16, int64 or bool)");
}

py::dtype numpy_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32: return py::dtype::of<float>();
    case DType::i64: return py::dtype::of<int64_t>();
    case DType::boolean: return py::dtype::of<bool>();
    case DType::f16: return py::dtype("float16");
    case DType::bf16: break;  // numpy has no bfloat16: to_array widens first
  }
  fail(ErrorKind::internal, "no numpy dtype for ", dtype_name(dtype));
}

}  // namespace

Tensor borrow_array(const py::array& array, const char* name) {
  const DType dtype = dtype_of(array, name);
  CPDIT_CHECK(array.flags() & py::array::c_style, invalid_argument, name,
              ": the array must be C-contiguous (np.ascontiguousarray makes it so)");
  Shape shape(array.shape(), array.shape() + array.ndim());
  // No owner: the Python call that received `array` holds it until the tensor is gone.
  return Tensor::borrow(const_cast<void*>(array.data()), shape, dtype, nullptr);
}

py::array to_array(const Tensor& tensor) {
  const Tensor t = (tensor.dtype() == DType::bf16 ? tensor.to(DType::f32) : tensor).contiguous();
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end()), strides;
  const py::ssize_t item = py::ssize_t(dtype_size(t.dtype()));
  for (int64_t s : t.strides()) strides.push_back(py::ssize_t(s) * item);
  // The capsule owns a handle on the tensor's storage for as long as the array lives.
  auto* owner = new Tensor(t);
  py::capsule keep(owner, [](void* p) { delete static_cast<Tensor*>(p); });
  return py::array(numpy_dtype(t.dtype()), shape, strides, t.raw(), keep);
}

}  // namespace cpdit::python
