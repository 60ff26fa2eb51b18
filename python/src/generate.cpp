// The pipelines' native side: the generate job of `cpdit generate` (apps/cpdit/generate.hpp) with
// arrays in and out instead of files, run with the GIL released; Ctrl-C stops it at the next step.
#include "arrays.hpp"
#include "bindings.hpp"

#include "generate.hpp"
#include "stop_request.hpp"

#include <cpdit/comm/launch.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/parallel/config.hpp>

#include <pybind11/stl.h>

#include <csignal>
#include <optional>
#include <string>

namespace py = pybind11;

namespace cpdit::python {
namespace {

extern "C" void stop_on_sigint(int) { app::request_stop(); }

// While a generation runs with the GIL released, Python's own SIGINT handler cannot run: this one
// asks the generation to stop instead, and the previous handler comes back when it ends.
class SigintStops {
 public:
  SigintStops() {
    app::clear_stop_request();
    struct sigaction stop {};
    stop.sa_handler = stop_on_sigint;
    sigemptyset(&stop.sa_mask);
    sigaction(SIGINT, &stop, &previous_);
  }
  ~SigintStops() { sigaction(SIGINT, &previous_, nullptr); }
  SigintStops(const SigintStops&) = delete;
  SigintStops& operator=(const SigintStops&) = delete;

 private:
  struct sigaction previous_ {};
};

std::string pipeline_name(pipeline::PipelineKind kind) {
  switch (kind) {
    case pipeline::PipelineKind::flux: return "flux";
    case pipeline::PipelineKind::wan: return "wan";
    case pipeline::PipelineKind::qwenimage: return "qwenimage";
    case pipeline::PipelineKind::skyreels_v2: return "skyreels_v2";
    case pipeline::PipelineKind::ltx_video: return "ltx_video";
  }
  return "unknown";
}

// Rank 0's result as a dict (latents, pixels or None, and what the run chose: steps, sizes, pipeline,
// ranks); None on the other processes of an mpirun launch, as the command line writes only on rank 0.
// `args` is the caller's, copied: the arrays borrowed here must not outlive this call.
py::object generate(app::GenerateArgs args, const py::dict& embeddings, const std::optional<py::array>& latents,
                    bool sigint_stops) {
  for (const auto& [name, array] : embeddings) {
    const std::string key = py::cast<std::string>(name);
    args.embedding_tensors[key] = borrow_array(py::cast<py::array>(array), key.c_str());
  }
  if (latents) args.initial_latents = borrow_array(*latents, "latents");
  args.json = true;  // no progress lines or stage summaries on stderr, as with --json

  app::Generation generation;
  bool interrupted = false;
  {
    py::gil_scoped_release release;
    std::optional<SigintStops> stops;
    if (sigint_stops) stops.emplace();
    pipeline::StageLog stages;
    try {
      generation = app::generate(args, stages);
    } catch (const Error&) {
      if (!app::stop_requested()) throw;
    }
    interrupted = app::stop_requested();  // also a Ctrl-C after the last step
    app::clear_stop_request();
  }
  if (interrupted) {
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    throw py::error_already_set();
  }
  if (!app::lead_process()) return py::none();
  py::dict result;
  result["latents"] = to_array(generation.latents);
  result["pixels"] = generation.pixels.defined() ? py::object(to_array(generation.pixels)) : py::none();
  result["pipeline"] = pipeline_name(generation.info.pipeline);
  result["steps"] = args.steps;
  result["height"] = args.height;
  result["width"] = args.width;
  result["frames"] = args.frames;
  result["ranks"] = generation.info.layout.ranks;
  result["ring_degree"] = generation.info.layout.config.ring_degree;
  result["ulysses_degree"] = generation.info.layout.config.ulysses_degree;
  return result;
}

void check_parallel_config(int ring, int ulysses, int cfg, const std::string& rotate) {
  parallel::ContextParallelConfig config;
  config.ring_degree = ring;
  config.ulysses_degree = ulysses;
  config.cfg_degree = cfg;
  config.rotate_method = parallel::parse_rotate_method(rotate);
  parallel::validate_degrees(config, config.group_size());
}

}  // namespace

void bind_generate(py::module_& m) {
  m.def("launched_by_mpi", &comm::launched_by_mpi, "whether mpirun launched this process (its ranks are then MPI's)");
  m.def("check_parallel_config", &check_parallel_config, py::arg("ring_degree"), py::arg("ulysses_degree"),
        py::arg("cfg_degree"), py::arg("rotate_method"),
        "refuses (ValueError, the engine's message) degrees below 1, a CFG degree other than 1 or 2, or an unknown "
        "rotate method");
  m.def("generate", &generate, py::arg("args"), py::arg("embeddings") = py::dict(), py::arg("latents") = py::none(),
        py::arg("sigint_stops") = true,
        "`cpdit generate` in memory: `args` as the flags, embeddings by their --embeddings names, latents as "
        "--latents; arrays are read in place. Returns rank 0's result as a dict, None on the other processes of an "
        "mpirun launch. Raises KeyboardInterrupt when SIGINT stopped it.");
}

}  // namespace cpdit::python
