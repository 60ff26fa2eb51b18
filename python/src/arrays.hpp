#pragma once
// numpy arrays and cpdit tensors over the same memory, both ways.
#include <cpdit/core/tensor.hpp>

#include <pybind11/numpy.h>

namespace cpdit::python {

// A C-contiguous float32/float16/int64/bool array as a Tensor over its memory, not copied. The
// caller keeps the array alive while the tensor is in use (the Python call that received it does);
// any other layout or dtype is refused with a ValueError (the package's Python side makes a
// contiguous float32 copy first where it has to).
Tensor borrow_array(const pybind11::array& array, const char* name);

// A Tensor as a numpy array over its storage, not copied; the array keeps the storage alive.
pybind11::array to_array(const Tensor& tensor);

}  // namespace cpdit::python
