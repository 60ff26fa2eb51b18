#pragma once
// Which denoising loop `generate` runs for a transformer, keyed by the class name the model registry
// resolved. A class the registry knows but no pipeline runs (a text encoder, a VAE, a transformer
// whose loop is not written yet) is refused here rather than run as another model.
#include <cpdit/core/error.hpp>
#include <cpdit/models/registry.hpp>

#include <any>
#include <string>

namespace cpdit::pipeline {

enum class PipelineKind { flux, wan, qwenimage, skyreels_v2, ltx_video };

// Refuses a class that has no pipeline, naming the classes that have one.
PipelineKind pipeline_for(const std::string& class_name);

// The config of a model a pipeline runs, as the config type of the class it was written for.
template <class Config>
const Config& config_of(const models::LoadedModel& model) {
  const Config* config = std::any_cast<Config>(&model.config);
  CPDIT_CHECK(config, internal, "the pipeline for ", model.class_name, " was given another model's config");
  return *config;
}

}  // namespace cpdit::pipeline
