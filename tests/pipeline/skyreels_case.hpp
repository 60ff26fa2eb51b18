#pragma once
// The SkyReels-V2 pipeline options of a fixture's case.json (tools/reference/skyreels_df_*.py): the
// short rollout's fields and, where the case has them, the long video's.
#include <cpdit/core/tensor.hpp>
#include <cpdit/pipeline/skyreels_pipeline.hpp>

#include <nlohmann/json.hpp>

namespace cpdit::pipeline::testing {

// `inputs` holds negative_prompt_embeds (guidance runs when the case's guidance is above 1).
inline SkyReelsGenerateOptions case_options(const nlohmann::json& c, const nn::TensorMap& inputs) {
  SkyReelsGenerateOptions options;
  options.video.steps = c["steps"];
  options.video.frames = c["frames"];
  options.video.height = c["height"];
  options.video.width = c["width"];
  options.video.guidance_scale = c["guidance"];
  options.video.negative_prompt_embeds = inputs.at("negative_prompt_embeds");
  options.ar_step = c["ar_step"];
  options.fps = c["fps"];
  if (c.contains("base_num_frames")) {
    options.base_frames = c["base_num_frames"];
    options.overlap_history = c["overlap_history"].get<int64_t>();
    options.addnoise_condition = c["addnoise_condition"];
  }
  return options;
}

}  // namespace cpdit::pipeline::testing
