// The options of the generate job as Python objects: GenerateArgs and its ParallelFlags, field by
// field under their C++ names. The package's pipelines set the fields a call gives; a field left alone
// keeps the command line's default (0, NaN or None: the pipeline's own).
#include "bindings.hpp"

#include "generate.hpp"
#include "parallel_flags.hpp"

#include <pybind11/stl.h>

namespace py = pybind11;

namespace cpdit::python {

void bind_generate_args(py::module_& m) {
  py::class_<app::ParallelFlags>(m, "ParallelFlags",
                                 "--ring, --ulysses, --cfg, --rotate, --backend, --ranks and --threads")
      .def(py::init<>())
      .def_readwrite("ring", &app::ParallelFlags::ring)
      .def_readwrite("ulysses", &app::ParallelFlags::ulysses)
      .def_readwrite("cfg", &app::ParallelFlags::cfg)
      .def_readwrite("rotate", &app::ParallelFlags::rotate)
      .def_readwrite("backend", &app::ParallelFlags::backend)
      .def_readwrite("ranks", &app::ParallelFlags::ranks)
      .def_readwrite("threads", &app::ParallelFlags::threads);
  py::class_<app::GenerateArgs>(m, "GenerateArgs", "the options of `cpdit generate` (apps/cpdit/generate.hpp)")
      .def(py::init<>())
      .def_readwrite("model", &app::GenerateArgs::model)
      .def_readwrite("preset", &app::GenerateArgs::preset)
      .def_readwrite("dtype", &app::GenerateArgs::dtype)
      .def_readwrite("prompt", &app::GenerateArgs::prompt)
      .def_readwrite("negative_prompt", &app::GenerateArgs::negative_prompt)
      .def_readwrite("steps", &app::GenerateArgs::steps)
      .def_readwrite("height", &app::GenerateArgs::height)
      .def_readwrite("width", &app::GenerateArgs::width)
      .def_readwrite("frames", &app::GenerateArgs::frames)
      .def_readwrite("text_tokens", &app::GenerateArgs::text_tokens)
      .def_readwrite("ar_step", &app::GenerateArgs::ar_step)
      .def_readwrite("first_image", &app::GenerateArgs::first_image)
      .def_readwrite("last_image", &app::GenerateArgs::last_image)
      .def_readwrite("init_image", &app::GenerateArgs::init_image)
      .def_readwrite("strength", &app::GenerateArgs::strength)
      .def_readwrite("fps", &app::GenerateArgs::fps)
      .def_readwrite("base_num_frames", &app::GenerateArgs::base_num_frames)
      .def_readwrite("overlap_history", &app::GenerateArgs::overlap_history)
      .def_readwrite("addnoise_condition", &app::GenerateArgs::addnoise_condition)
      .def_readwrite("decode_timestep", &app::GenerateArgs::decode_timestep)
      .def_readwrite("decode_noise_scale", &app::GenerateArgs::decode_noise_scale)
      .def_readwrite("seed", &app::GenerateArgs::seed)
      .def_readwrite("guidance", &app::GenerateArgs::guidance)
      .def_readwrite("guidance_2", &app::GenerateArgs::guidance_2)
      .def_readwrite("true_cfg_scale", &app::GenerateArgs::true_cfg_scale)
      .def_readwrite("decode", &app::GenerateArgs::decode)
      .def_readwrite("parallel", &app::GenerateArgs::parallel);
}

}  // namespace cpdit::python
