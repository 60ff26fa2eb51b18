#pragma once
// The SkyReels-V2 pipeline options of a fixture's case.json (tools/reference/skyreels_df_*.py): the
// short rollout's fields and, where the case has them, the long video's; and a rollout of them on
// local ranks fed a fixture's recorded random draws.
#include <cpdit/comm/local.hpp>
#include <cpdit/comm/mesh.hpp>
#include <cpdit/core/tensor.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/pipeline/skyreels_pipeline.hpp>

#include <nlohmann/json.hpp>

#include <mutex>
#include <string>

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

struct Split {
  int cfg, ring, ulysses;
};

// generate_skyreels_v2 of `options` on cfg x ring x ulysses local ranks (one compute thread each), random
// draw n taken as `draws`' tensor noise_n, the order diffusers drew them in: rank 0's final latents.
inline Tensor generate_on_ranks(const models::skyreels_v2::SkyReelsV2Checkpoint& ck, const UniPCConfig& scheduler,
                                const Tensor& prompt_embeds, const SkyReelsGenerateOptions& options,
                                const nn::TensorMap& draws, Split split) {
  Tensor latents;
  std::mutex mutex;
  comm::LocalOptions one_thread_each;
  one_thread_each.threads_per_rank = 1;
  comm::run_local(
      split.cfg * split.ring * split.ulysses,
      [&](comm::Communicator& world) {
        comm::Mesh mesh(world.split(0, world.rank()), split.ring, split.ulysses, split.cfg);
        auto model = models::skyreels_v2::load_skyreels_v2(ck);
        if (mesh.flat().size() > 1) model->enable_parallelism(mesh.flat_group(), {split.ring, split.ulysses});
        SkyReelsGenerateOptions mine = options;
        mine.video.cfg = &mesh.cfg();
        mine.noise = [&](int64_t draw, const Shape&) { return draws.at("noise_" + std::to_string(draw)); };
        const WanGenerateResult r = generate_skyreels_v2(*model, ck.config, scheduler, prompt_embeds, mine);
        std::lock_guard lock(mutex);
        if (world.rank() == 0) latents = r.latents;
      },
      one_thread_each);
  return latents;
}

}  // namespace cpdit::pipeline::testing
