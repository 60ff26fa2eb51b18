// A generation's options as Python objects: pipeline::PipelineSource (what a pipeline opens),
// pipeline::Request (one call) and its parallel::RankRequest, field by field under their C++ names. The
// package's pipelines set the fields a call gives; a field left alone keeps its default (0, NaN or
// None: the pipeline's own).
#include "bindings.hpp"

#include <cpdit/nn/lora.hpp>
#include <cpdit/nn/step_cache.hpp>
#include <cpdit/pipeline/pipeline.hpp>

#include <pybind11/stl.h>

namespace py = pybind11;

namespace cpdit::python {

void bind_request(py::module_& m) {
  m.def(
      "read_lora",
      [](const std::string& path) {
        const nn::LoraFile file = nn::read_lora(path);
        py::dict out;
        out["layout"] = file.layout;
        out["modules"] = file.modules.size();
        return out;
      },
      py::arg("path"), "a LoRA file read and checked as a run reads it: its layout and module count");
  using parallel::RankRequest;
  using pipeline::PipelineSource;
  using pipeline::Request;
  py::class_<RankRequest>(m, "RankRequest",
                          "--ring, --ulysses, --cfg-parallel, --rotate, --backend, --ranks and --threads")
      .def(py::init<>())
      .def_readwrite("ring", &RankRequest::ring)
      .def_readwrite("ulysses", &RankRequest::ulysses)
      .def_readwrite("cfg", &RankRequest::cfg)
      .def_readwrite("rotate", &RankRequest::rotate)
      .def_readwrite("backend", &RankRequest::backend)
      .def_readwrite("ranks", &RankRequest::ranks)
      .def_readwrite("threads", &RankRequest::threads);
  py::class_<PipelineSource>(m, "PipelineSource", "what a pipeline opens (include/cpdit/pipeline/pipeline.hpp)")
      .def(py::init<>())
      .def_readwrite("model", &PipelineSource::model)
      .def_readwrite("preset", &PipelineSource::preset)
      .def_readwrite("config", &PipelineSource::config)
      .def_readwrite("transformer", &PipelineSource::transformer)
      .def_readwrite("dtype", &PipelineSource::dtype);
  py::class_<Request>(m, "Request", "one generation's options (include/cpdit/pipeline/request.hpp)")
      .def(py::init<>())
      .def_readwrite("prompt", &Request::prompt)
      .def_readwrite("negative_prompt", &Request::negative_prompt)
      .def_readwrite("random_embeddings", &Request::random_embeddings)
      .def_readwrite("steps", &Request::steps)
      .def_readwrite("height", &Request::height)
      .def_readwrite("width", &Request::width)
      .def_readwrite("frames", &Request::frames)
      .def_readwrite("text_tokens", &Request::text_tokens)
      .def_readwrite("ar_step", &Request::ar_step)
      .def_readwrite("first_image", &Request::first_image)
      .def_readwrite("last_image", &Request::last_image)
      .def_readwrite("init_image", &Request::init_image)
      .def_readwrite("strength", &Request::strength)
      .def_readwrite("fps", &Request::fps)
      .def_readwrite("base_num_frames", &Request::base_num_frames)
      .def_readwrite("overlap_history", &Request::overlap_history)
      .def_readwrite("addnoise_condition", &Request::addnoise_condition)
      .def_readwrite("decode_timestep", &Request::decode_timestep)
      .def_readwrite("decode_noise_scale", &Request::decode_noise_scale)
      .def_readwrite("seed", &Request::seed)
      .def_readwrite("guidance", &Request::guidance)
      .def_readwrite("guidance_2", &Request::guidance_2)
      .def_readwrite("true_cfg_scale", &Request::true_cfg_scale)
      .def_property(
          "decode", [](const Request& r) { return r.decode == pipeline::Decode::yes; },
          [](Request& r, bool decode) { r.decode = decode ? pipeline::Decode::yes : pipeline::Decode::no; })
      // The request's SchedulerChoice, flat: --scheduler, --flow-shift, --sigmas.
      .def_property(
          "scheduler", [](const Request& r) { return r.scheduler.name; },
          [](Request& r, const std::string& name) { r.scheduler.name = name; })
      .def_property(
          "flow_shift", [](const Request& r) { return r.scheduler.flow_shift; },
          [](Request& r, std::optional<double> shift) { r.scheduler.flow_shift = shift; })
      .def_property(
          "sigmas", [](const Request& r) { return r.scheduler.sigmas; },
          [](Request& r, const std::vector<double>& sigmas) { r.scheduler.sigmas = sigmas; })
      // The request's LoRA adapters as (path, weight, merge, low_noise) tuples: --lora FILE:WEIGHT (or
      // --lora-2, Wan 2.2's low-noise expert) [--lora-merge].
      .def_property(
          "loras",
          [](const Request& r) {
            std::vector<std::tuple<std::string, double, bool, bool>> loras;
            for (const pipeline::LoraChoice& lora : r.loras)
              loras.emplace_back(lora.path, lora.weight, lora.merge, lora.low_noise);
            return loras;
          },
          [](Request& r, const std::vector<std::tuple<std::string, double, bool, bool>>& loras) {
            r.loras.clear();
            for (const auto& [path, weight, merge, low_noise] : loras) r.loras.push_back({path, weight, merge, low_noise});
          })
      // The request's step cache as --cache spells it (nn::parse_step_cache; "none": no cache).
      .def_property(
          "cache", [](const Request& r) { return nn::step_cache_name(r.cache); },
          [](Request& r, const std::string& spec) { r.cache = nn::parse_step_cache(spec); })
      .def_readwrite("parallel", &Request::parallel);
}

}  // namespace cpdit::python
