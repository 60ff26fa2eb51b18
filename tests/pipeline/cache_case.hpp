#pragma once
// The step-cache fixtures (tests/data/fixtures/cache_flux_tiny, cache_wan_tiny: diffusers' own
// FirstBlockCache and MagCache hooks on a tiny random FluxPipeline and WanPipeline, with the per-call
// skip pattern and decision values they recorded; TaylorSeer's with the attentions each call ran), opened once, and one of their cases run as a
// Request on any split; the request of a fixture's call.json, which the LoRA fixtures share.
#include "support/model_fixture.hpp"

#include <cpdit/io/safetensors.hpp>
#include <cpdit/pipeline/latents.hpp>
#include <cpdit/pipeline/pipeline.hpp>

#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

namespace cpdit::testing {

inline nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// diffusers' embeddings and initial latents (`inputs`: its inputs.safetensors) with a call's steps, size
// and frames (0: none), on `ranks` local ranks of one thread each.
inline pipeline::Request fixture_request(const nn::TensorMap& inputs, int steps, int64_t height, int64_t width,
                                         int64_t frames, int ranks = 1) {
  pipeline::Request r;
  r.embeddings = inputs;
  r.initial_latents = inputs.at("latents");
  r.steps = steps;
  r.height = height;
  r.width = width;
  r.frames = frames;
  r.parallel.ranks = ranks;
  r.parallel.threads = 1;
  return r;
}

// diffusers' call of a pipeline fixture (its call.json: steps, size, frames) with the fixture's embeddings
// and initial latents. guidance_scale is left to the pipeline: the fixtures' calls give FLUX.1's 3.5 and
// Wan's 5.0, both pipelines' defaults, and their FLUX.1 models have no guidance embedding to take one
// (diffusers ignores it there).
inline pipeline::Request fixture_call(const nn::TensorMap& inputs, const nlohmann::json& call, int ranks = 1) {
  return fixture_request(inputs, call.at("num_inference_steps").get<int>(), call.at("height").get<int64_t>(),
                         call.at("width").get<int64_t>(), call.value("num_frames", int64_t(0)), ranks);
}

// A pipeline fixture's call (its case.json: size, steps, and frames, guidance, true_cfg_scale where given)
// on diffusers' embeddings and initial latents (its inputs.safetensors), on one rank.
inline pipeline::Request pipeline_case_call(const std::string& fixture) {
  const nlohmann::json c = read_json_file(fixture_dir(fixture) + "/case.json");
  pipeline::Request r = fixture_request(io::load_safetensors(fixture_dir(fixture) + "/inputs.safetensors"),
                                        c.at("steps").get<int>(), c.at("height").get<int64_t>(),
                                        c.at("width").get<int64_t>(), c.value("frames", int64_t(0)));
  if (c.contains("guidance")) r.guidance = c.at("guidance").get<float>();
  if (c.contains("true_cfg_scale")) r.true_cfg_scale = c.at("true_cfg_scale").get<float>();
  return r;
}

struct CacheFixture {
  std::string name;  // "cache_flux_tiny"
  pipeline::Pipeline pipe;
  nn::TensorMap inputs, expected;
  nlohmann::json cases, patterns, run_log, call;

  explicit CacheFixture(const std::string& fixture)
      : name(fixture),
        pipe(pipeline::Pipeline::open({.model = fixture_dir(fixture) + "/pipeline"}, pipeline::LoadPolicy::resident)),
        inputs(fixture_file(fixture, "inputs")),
        expected(fixture_file(fixture, "expected")),
        cases(read_json_file(fixture_dir(fixture) + "/cases.json")),
        patterns(read_json_file(fixture_dir(fixture) + "/skip_patterns.json")),
        run_log(read_json_file(fixture_dir(fixture) + "/run_log.json")),
        call(read_json_file(fixture_dir(fixture) + "/call.json")) {}

  // The case's diffusers config (cases.json: `type` and its keyword arguments) as a cache spec.
  nn::StepCacheConfig config(const std::string& case_name) const {
    const nlohmann::json& c = cases.at(case_name);
    nn::StepCacheConfig config;
    if (c.is_null()) return config;
    const nlohmann::json& kw = c.at("kwargs");
    if (c.at("type") == "FirstBlockCacheConfig") {
      config.kind = nn::StepCacheConfig::Kind::first_block;
      config.threshold = kw.value("threshold", 0.05);
    } else if (c.at("type") == "TaylorSeerCacheConfig") {
      config.kind = nn::StepCacheConfig::Kind::taylor_seer;
      config.cache_interval = kw.value("cache_interval", 5);
      config.disable_cache_before_step = kw.value("disable_cache_before_step", 3);
      config.max_order = kw.value("max_order", 1);
      config.f32_factors = kw.value("taylor_factors_dtype", "bfloat16") == "float32";
      // diffusers' own defaults when the case names no modules (the family's may differ: Wan's).
      config.modules = kw.value("cache_identifiers", nn::taylor_seer_default_modules());
    } else {
      EXPECT_EQ(c.at("type"), "MagCacheConfig") << case_name;
      config.kind = nn::StepCacheConfig::Kind::mag;
      config.threshold = kw.value("threshold", 0.06);
      config.calibrate = kw.value("calibrate", false);
      if (kw.contains("mag_ratios")) config.mag_ratios = kw.at("mag_ratios").get<std::vector<float>>();
      EXPECT_EQ(kw.at("num_inference_steps").get<int>(), call.at("num_inference_steps").get<int>()) << case_name;
    }
    return config;
  }

  pipeline::Request request(const nn::StepCacheConfig& cache, int ranks = 1) const {
    pipeline::Request r = fixture_call(inputs, call, ranks);
    r.cache = cache;
    return r;
  }

  pipeline::Result run(const pipeline::Request& r) const {
    pipeline::StageLog log;
    return pipe.run(r, log);
  }
};

// `latents` as the fixture holds them: diffusers' FluxPipeline returns its latents packed (output_type
// 'latent'), a Result (and --out) holds them unpacked.
inline Tensor in_fixture_layout(const Tensor& latents, const Tensor& expected) {
  return latents.dim() == 4 && expected.dim() == 3 ? pipeline::flux_pack(latents) : latents;
}

// One letter per transformer call in call order, as skip_patterns.json's `compact`: F computed, S skipped.
inline std::string compact_pattern(const nn::StepCacheReport& report) {
  std::string s;
  for (const nn::CacheDecision& d : report.decisions) s += d.computed ? 'F' : 'S';
  return s;
}

}  // namespace cpdit::testing
