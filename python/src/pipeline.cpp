// The pipelines' native side: pipeline::Pipeline (include/cpdit/pipeline/pipeline.hpp), opened once and
// run for every call with arrays in and out instead of files, with the GIL released; Ctrl-C cancels the
// run at the next step, on every rank, and leaves the pipeline usable. The interpreter's exit waits for
// the calls still running on other threads, the generations cancelled at their next step.
#include "arrays.hpp"
#include "bindings.hpp"

#include <cpdit/comm/launch.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/models/registry.hpp>
#include <cpdit/parallel/config.hpp>
#include <cpdit/pipeline/pipeline.hpp>
#include <cpdit/pipeline/vae_decode.hpp>

#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace py = pybind11;

namespace cpdit::python {
namespace {

// Lock-free, so the signal handler may set it; the running request's cancel flag.
std::atomic<bool> stop{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void stop_on_sigint(int) { stop.store(true); }

// The native calls running with the GIL released (open, run, decode), on any thread.
std::atomic<int> in_flight{0};

class NativeCall {
 public:
  NativeCall() { in_flight.fetch_add(1); }
  ~NativeCall() { in_flight.fetch_sub(1); }
  NativeCall(const NativeCall&) = delete;
  NativeCall& operator=(const NativeCall&) = delete;
};

// Registered with atexit: a daemon thread may still be inside a call when the interpreter exits, and
// finalisation would then free what the call is using (SIGSEGV). Each running generation is cancelled
// (stop is set again until they are all out: a run that ends resets it) and the exit waits for the calls.
// A call counts until it holds the GIL again: a thread taking the GIL back during finalisation would be
// ended inside the C++ frames of the call (pthread_exit through a noexcept destructor: abort).
void wait_for_native_calls() {
  if (in_flight.load() == 0) return;
  py::gil_scoped_release release;  // the calls take the GIL to return
  while (in_flight.load() > 0) {
    stop.store(true);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// While a generation runs with the GIL released, Python's own SIGINT handler cannot run: this one
// cancels the generation instead, and the previous handler comes back when it ends.
class SigintStops {
 public:
  SigintStops() {
    stop.store(false);
    struct sigaction handler {};
    handler.sa_handler = stop_on_sigint;
    sigemptyset(&handler.sa_mask);
    sigaction(SIGINT, &handler, &previous_);
  }
  ~SigintStops() { sigaction(SIGINT, &previous_, nullptr); }
  SigintStops(const SigintStops&) = delete;
  SigintStops& operator=(const SigintStops&) = delete;

 private:
  struct sigaction previous_ {};
};

// Rank 0's result as a dict (latents, pixels or None, and what the run chose: steps, sizes, pipeline,
// ranks); None on the other processes of an mpirun launch, as the command line writes only on rank 0.
// `request` is the caller's, copied: the arrays borrowed here must not outlive this call.
// The Python callbacks of a run, called on rank 0's thread with the GIL taken there. They hold the
// caller's objects by address (the call outlives the run), so the Request's copies touch no Python
// reference counts without the GIL; an exception raised in one ends the run as that exception.
// on_step_latents returns None, latents, or (latents or None, whether the loop ends after this step).
void set_callbacks(pipeline::Request& request, const py::object& on_step, const py::object& on_step_latents,
                   std::atomic<bool>& finish) {
  if (!on_step.is_none())
    request.on_step = [fn = &on_step](int step, int total, double) {
      py::gil_scoped_acquire gil;
      (*fn)(step, total);
    };
  if (!on_step_latents.is_none())
    request.on_step_latents = [fn = &on_step_latents, finish = &finish](
                                  int step, double timestep, const Tensor& latents) -> std::optional<Tensor> {
      py::gil_scoped_acquire gil;
      py::array view = to_array(latents);
      view.attr("setflags")(py::arg("write") = false);  // the loop's own: replaced by returning new ones
      py::object out = (*fn)(step, timestep, view);
      if (py::isinstance<py::tuple>(out)) {
        const py::tuple pair = out;
        CPDIT_CHECK(pair.size() == 2, invalid_argument, "on_step_latents returned a tuple of ", pair.size(),
                    ", not (latents or None, finish)");
        if (pair[1].cast<bool>()) finish->store(true);
        out = pair[0];
      }
      if (out.is_none()) return std::nullopt;
      return borrow_array(py::cast<py::array>(out), "the step callback's latents").clone();  // owned past the call
    };
  request.finish = &finish;
}

py::object run(const pipeline::Pipeline& pipe, pipeline::Request request, const py::dict& embeddings,
               const std::optional<py::array>& latents, bool sigint_stops, const py::object& on_step,
               const py::object& on_step_latents) {
  for (const auto& [name, array] : embeddings) {
    const std::string key = py::cast<std::string>(name);
    request.embeddings[key] = borrow_array(py::cast<py::array>(array), key.c_str());
  }
  if (latents) request.initial_latents = borrow_array(*latents, "latents");
  const NativeCall call;  // counted until the result is made, the GIL held again
  std::atomic<bool> finish{false};
  set_callbacks(request, on_step, on_step_latents, finish);

  pipeline::Result result;
  bool interrupted = false;
  {
    py::gil_scoped_release release;
    std::optional<SigintStops> stops;
    if (sigint_stops) stops.emplace();
    request.cancel = &stop;
    pipeline::StageLog stages;
    try {
      result = pipe.run(std::move(request), stages);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::interrupted) throw;
      interrupted = true;
    }
    interrupted = interrupted || stop.load();  // also a Ctrl-C after the last step
    stop.store(false);
  }
  if (interrupted) {
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    throw py::error_already_set();
  }
  if (!pipeline::lead_process()) return py::none();
  py::dict out;
  out["latents"] = to_array(result.latents);
  out["pixels"] = result.pixels.defined() ? py::object(to_array(result.pixels)) : py::none();
  out["pipeline"] = result.family->name();
  out["steps"] = result.request.steps;
  out["height"] = result.request.height;
  out["width"] = result.request.width;
  out["frames"] = result.request.frames;
  out["ranks"] = result.layout.ranks;
  out["ring_degree"] = result.layout.config.ring_degree;
  out["ulysses_degree"] = result.layout.config.ulysses_degree;
  return out;
}

// pipe.vae.decode's engine side: the VAE's decoder on `z` over `ranks` local ranks (rows split, exact),
// rank 0's sample. The GIL is released while it decodes; `z` is the caller's, alive for the call.
py::array decode_vae(const pipeline::Pipeline& pipe, const py::array& z, int ranks) {
  CPDIT_CHECK(ranks >= 1, invalid_argument, "ranks must be at least 1, got ", ranks);
  const Tensor input = borrow_array(z, "z");
  const NativeCall call;
  Tensor sample;
  {
    py::gil_scoped_release release;
    const models::LoadedModel vae = pipe.vae();
    std::mutex kept;
    comm::run_ranks(ranks, [&](comm::Communicator& world) {
      Tensor mine = pipeline::decode_vae_input(vae, input, world);
      if (world.rank() != 0) return;
      std::lock_guard<std::mutex> lock(kept);
      sample = std::move(mine);
    });
  }
  return to_array(sample);
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

void bind_pipeline(py::module_& m) {
  py::module_::import("atexit").attr("register")(py::cpp_function(&wait_for_native_calls));
  py::enum_<pipeline::LoadPolicy>(m, "LoadPolicy")
      .value("automatic", pipeline::LoadPolicy::automatic)
      .value("resident", pipeline::LoadPolicy::resident)
      .value("staged", pipeline::LoadPolicy::staged);
  py::class_<pipeline::Pipeline>(m, "Pipeline", "a pipeline opened once, run for any number of requests")
      .def_static(
          "open",
          [](const pipeline::PipelineSource& source, pipeline::LoadPolicy policy) {
            const NativeCall call;  // counted until the GIL is back (see wait_for_native_calls)
            py::gil_scoped_release release;
            return pipeline::Pipeline::open(source, policy);
          },
          py::arg("source"), py::arg("policy") = pipeline::LoadPolicy::automatic)
      .def("run", &run, py::arg("request"), py::arg("embeddings") = py::dict(), py::arg("latents") = py::none(),
           py::arg("sigint_stops") = true, py::arg("on_step") = py::none(), py::arg("on_step_latents") = py::none(),
           "one generation: embeddings by their --embeddings names, latents as --latents; arrays are read in place. "
           "on_step(step, total) is called after each step, on_step_latents(step, timestep, latents) after each "
           "step's scheduler step with the whole latents (a read-only float32 array in the loop's layout), and an "
           "array it returns (their shape) replaces them on every rank; returning (latents or None, True) also ends "
           "the loop after this step, its latents the result (diffusers' pipe._interrupt). Returns rank 0's result as a dict, None on "
           "the other processes of an mpirun launch. Raises KeyboardInterrupt when SIGINT cancelled it, and what a "
           "callback raised.")
      .def("decode_vae", &decode_vae, py::arg("z"), py::arg("ranks") = 1,
           "the VAE's decoder alone on z (float32, as diffusers' vae.decode takes it: the pipeline's unscaling "
           "done), its rows split over `ranks` local ranks (exact); returns the sample")
      .def("vae_config", [](const pipeline::Pipeline& p) { return pipeline::vae_config_json(p.vae()).dump(); },
           "the VAE's config in diffusers' names, as JSON")
      .def_property_readonly("has_vae", &pipeline::Pipeline::has_vae)
      .def_property_readonly("family", [](const pipeline::Pipeline& p) { return p.family().name(); })
      .def_property_readonly("resident", &pipeline::Pipeline::resident);
  m.def("models_opened", &models::models_opened, "how many models this process has opened from files");
  m.def("launched_by_mpi", &comm::launched_by_mpi, "whether mpirun launched this process (its ranks are then MPI's)");
  m.def("check_parallel_config", &check_parallel_config, py::arg("ring_degree"), py::arg("ulysses_degree"),
        py::arg("cfg_degree"), py::arg("rotate_method"),
        "refuses (ValueError, the engine's message) degrees below 1, a CFG degree other than 1 or 2, or an unknown "
        "rotate method");
}

}  // namespace cpdit::python
