// cpdit bench pipeline: N prompts on one resident Pipeline (opened once, models kept) against N separate
// runs that each open the pipeline staged, as N `cpdit generate` commands would (the process start
// aside): wall and process CPU seconds of both, min and median over the repeats, and their ratio.
#include "command.hpp"
#include "measure.hpp"

#include <cpdit/pipeline/pipeline.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace cpdit::bench {
namespace {

struct PipelineBenchArgs {
  std::string preset = "flux-mini";
  int prompts = 4;
  int steps = 4;
  int64_t height = 256, width = 256;
  int ranks = 1;
  int repeats = 2;
};

pipeline::Request request_for(const PipelineBenchArgs& a, int index) {
  pipeline::Request r;
  r.prompt = "prompt number " + std::to_string(index) + ": a red fox in the snow";
  r.steps = a.steps;
  r.height = a.height;
  r.width = a.width;
  r.seed = uint64_t(index);
  r.decode = pipeline::Decode::yes;
  r.parallel.ranks = a.ranks;
  return r;
}

void run(const PipelineBenchArgs& a) {
  pipeline::PipelineSource source;
  source.preset = a.preset;
  const Timing resident = measure(
      [&] {
        const pipeline::Pipeline pipe = pipeline::Pipeline::open(source, pipeline::LoadPolicy::resident);
        for (int i = 0; i < a.prompts; ++i) {
          pipeline::StageLog log;
          pipe.run(request_for(a, i), log);
        }
      },
      a.repeats);
  const Timing separate = measure(
      [&] {
        for (int i = 0; i < a.prompts; ++i) {
          const pipeline::Pipeline pipe = pipeline::Pipeline::open(source, pipeline::LoadPolicy::staged);
          pipeline::StageLog log;
          pipe.run(request_for(a, i), log);
        }
      },
      a.repeats);
  nlohmann::json j = line("pipeline");
  j["preset"] = a.preset;
  j["prompts"] = a.prompts;
  j["steps"] = a.steps;
  j["height"] = a.height;
  j["width"] = a.width;
  j["ranks"] = a.ranks;
  j["resident_wall_min_s"] = resident.min_s;
  j["resident_wall_median_s"] = resident.median_s;
  j["resident_cpu_min_s"] = resident.cpu_min_s;
  j["separate_wall_min_s"] = separate.min_s;
  j["separate_wall_median_s"] = separate.median_s;
  j["separate_cpu_min_s"] = separate.cpu_min_s;
  // What N prompts cost on one pipeline, as a share of N separate runs (1: nothing saved).
  j["resident_over_separate_wall"] = resident.min_s / separate.min_s;
  j["resident_over_separate_cpu"] = resident.cpu_min_s / separate.cpu_min_s;
  print(j);
}

void add_pipeline_bench(CLI::App& parent) {
  auto a = std::make_shared<PipelineBenchArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "pipeline", "N prompts on one resident pipeline against N separate staged runs (load, encode, denoise, decode)");
  cmd->add_option("--preset", a->preset, "the preset to run")->capture_default_str();
  cmd->add_option("--prompts", a->prompts, "prompts per batch")->capture_default_str();
  cmd->add_option("--steps", a->steps, "denoising steps per prompt")->capture_default_str();
  cmd->add_option("--height", a->height, "height in pixels")->capture_default_str();
  cmd->add_option("--width", a->width, "width in pixels")->capture_default_str();
  cmd->add_option("--ranks", a->ranks, "local ranks")->capture_default_str();
  cmd->add_option("--repeats", a->repeats, "timed repeats after one warm-up")->capture_default_str();
  cmd->callback([a] { run(*a); });
}

const bool registered = app::register_bench("pipeline", add_pipeline_bench);

}  // namespace
}  // namespace cpdit::bench
