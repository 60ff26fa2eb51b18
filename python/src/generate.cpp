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
py::object generate(app::GenerateArgs& args, const py::dict& embeddings, const std::optional<py::array>& latents,
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
  m.def(
      "generate",
      [](const std::string& model, const std::string& preset, std::optional<std::string> prompt,
         std::optional<std::string> negative_prompt, int64_t height, int64_t width, int64_t frames, int steps,
         float guidance, float true_cfg_scale, uint64_t seed, int64_t text_tokens, int64_t ar_step,
         std::optional<int64_t> fps,
         const py::dict& embeddings, const std::optional<py::array>& latents, bool decode, int ring, int ulysses,
         int cfg, const std::string& rotate, const std::string& backend, int ranks, int threads,
         const std::string& dtype, bool sigint_stops) {
        app::GenerateArgs args;
        args.model = model;
        args.preset = preset;
        args.prompt = std::move(prompt);
        args.negative_prompt = std::move(negative_prompt);
        args.height = height;
        args.width = width;
        args.frames = frames;
        args.steps = steps;
        args.guidance = guidance;
        args.true_cfg_scale = true_cfg_scale;
        args.seed = seed;
        args.text_tokens = text_tokens;
        args.ar_step = ar_step;
        args.fps = fps;
        args.decode = decode;
        args.parallel.ring = ring;
        args.parallel.ulysses = ulysses;
        args.parallel.cfg = cfg;
        args.parallel.rotate = rotate;
        args.parallel.backend = backend;
        args.parallel.ranks = ranks;
        args.parallel.threads = threads;
        args.dtype = dtype;
        return generate(args, embeddings, latents, sigint_stops);
      },
      py::kw_only(), py::arg("model") = "", py::arg("preset") = "", py::arg("prompt") = py::none(),
      py::arg("negative_prompt") = py::none(), py::arg("height") = 0, py::arg("width") = 0, py::arg("frames") = 0,
      py::arg("steps") = 0, py::arg("guidance") = std::nanf(""), py::arg("true_cfg_scale") = std::nanf(""),
      py::arg("seed") = 0, py::arg("text_tokens") = 0, py::arg("ar_step") = 0, py::arg("fps") = py::none(),
      py::arg("embeddings") = py::dict(), py::arg("latents") = py::none(), py::arg("decode") = false,
      py::arg("ring") = 0, py::arg("ulysses") = 0, py::arg("cfg") = 1, py::arg("rotate") = "p2p",
      py::arg("backend") = "", py::arg("ranks") = 0, py::arg("threads") = 0, py::arg("dtype") = "auto",
      py::arg("sigint_stops") = true,
      "`cpdit generate` in memory: the flags as keywords (0 and NaN: the pipeline's default), embeddings by their "
      "--embeddings names, latents as --latents; arrays are read in place. Returns rank 0's result as a dict, None "
      "on the other processes of an mpirun launch. Raises KeyboardInterrupt when SIGINT stopped it.");
}

}  // namespace cpdit::python
