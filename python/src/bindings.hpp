#pragma once
// The parts of cpdit._cpdit, each defined in its own file.
#include <pybind11/pybind11.h>

namespace cpdit::python {

// attention_dispatch, backends, tensor views (attention.cpp)
void bind_attention(pybind11::module_& m);
// Pipeline and the context-parallel checks (pipeline.cpp)
void bind_pipeline(pybind11::module_& m);
// PipelineSource, Request and RankRequest, a pipeline's options (request.cpp)
void bind_request(pybind11::module_& m);

}  // namespace cpdit::python
