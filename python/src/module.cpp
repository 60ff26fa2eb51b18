// cpdit._cpdit: the native half of the Python package. The package's .py files give it diffusers'
// shapes (python/cpdit/); this module gives them the engine: attention, context-parallel checks and
// the generate job. cpdit's errors become Python exceptions carrying the C++ message: bad arguments
// (ErrorKind::invalid_argument) ValueError, every other failure RuntimeError.
#include "bindings.hpp"

#include <cpdit/core/error.hpp>

#include <pybind11/pybind11.h>

namespace py = pybind11;

PYBIND11_MODULE(_cpdit, m) {
  m.doc() = "cpdit's engine: diffusion transformers with context parallelism (use the cpdit package)";
  m.attr("__version__") = CPDIT_VERSION;
  py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const cpdit::Error& e) {
      PyErr_SetString(e.kind() == cpdit::ErrorKind::invalid_argument ? PyExc_ValueError : PyExc_RuntimeError,
                      e.what());
    }
  });
  cpdit::python::bind_attention(m);
  cpdit::python::bind_request(m);
  cpdit::python::bind_pipeline(m);
}
