#pragma once
// The parts of cpdit._cpdit, each defined in its own file.
#include <pybind11/pybind11.h>

namespace cpdit::python {

// attention_dispatch, backends, tensor views (attention.cpp)
void bind_attention(pybind11::module_& m);
// generate and the context-parallel checks (generate.cpp)
void bind_generate(pybind11::module_& m);
// GenerateArgs and ParallelFlags, generate's options (generate_args.cpp)
void bind_generate_args(pybind11::module_& m);

}  // namespace cpdit::python
