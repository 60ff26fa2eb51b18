// cpdit.attention.dispatch's native side: attention::dispatch on numpy arrays, read in place.
#include "arrays.hpp"
#include "bindings.hpp"

#include <cpdit/attention/attention.hpp>
#include <cpdit/core/error.hpp>

#include <pybind11/stl.h>

#include <optional>
#include <string>

namespace py = pybind11;

namespace cpdit::python {
namespace {

// A bool (B, S_k) array is a key-padding mask, a bool (B|1, H|1, S_q, S_k) one a dense mask, a float
// one of that shape an additive bias (0 / -inf), as attention::MaskKind describes them.
attention::Mask mask_of(const py::array& array) {
  const Tensor t = borrow_array(array, "mask");
  if (t.dtype() == DType::boolean && t.dim() == 2) return attention::Mask::key_padding(t);
  if (t.dtype() == DType::boolean && t.dim() == 4) return attention::Mask::boolean(t);
  if (t.dtype() == DType::f32 && t.dim() == 4) return attention::Mask::additive(t);
  fail(ErrorKind::invalid_argument, "mask ", t.describe(),
       ": expected bool (B, S_k) key padding, bool (B|1, H|1, S_q, S_k) or float32 additive of that shape");
}

py::tuple dispatch(const py::array& q, const py::array& k, const py::array& v, const std::optional<py::array>& mask,
                   const std::string& backend, std::optional<float> scale) {
  attention::Options options;
  if (mask) options.mask = mask_of(*mask);
  options.scale = scale;
  const Tensor tq = borrow_array(q, "q"), tk = borrow_array(k, "k"), tv = borrow_array(v, "v");
  attention::Result result;
  {
    py::gil_scoped_release release;
    std::optional<attention::ScopedBackend> chosen;
    if (!backend.empty()) chosen.emplace(backend);
    result = attention::dispatch(tq, tk, tv, options);
  }
  return py::make_tuple(to_array(result.out), to_array(result.lse));
}

}  // namespace

void bind_attention(py::module_& m) {
  m.def("attention_dispatch", &dispatch, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("mask") = py::none(),
        py::arg("backend") = "", py::arg("scale") = py::none(),
        "attention::dispatch on C-contiguous arrays q (B, S_q, H, D), k, v (B, S_k, H_kv, D), read in place; "
        "returns (out (B, S_q, H, D), lse float32 (B, H, S_q)). backend '' is the process default; scale None is "
        "1/sqrt(D), another value must be positive and finite.");
  m.def("attention_backends", &attention::backend_names, "the registered attention backends");
  m.def(
      "check_attention_backend", [](const std::string& name) { attention::backend(name); }, py::arg("name"),
      "refuses (ValueError) a backend name that is not registered");
  m.def(
      "borrowed_address",
      [](const py::array& array) { return reinterpret_cast<uintptr_t>(borrow_array(array, "array").raw()); },
      py::arg("array"), "the address of the memory cpdit reads for this array: the array's own when it is not copied");
}

}  // namespace cpdit::python
