#pragma once
// A Wan-family denoising loop (generate_wan) of a fixture's pipeline folder on ring x ulysses local
// ranks, one compute thread each, as the image-to-video and two-expert tests run it.
#include <cpdit/comm/local.hpp>
#include <cpdit/comm/mesh.hpp>
#include <cpdit/models/registry.hpp>
#include <cpdit/models/skyreels_v2/model.hpp>
#include <cpdit/pipeline/family.hpp>
#include <cpdit/pipeline/wan_pipeline.hpp>

#include <filesystem>
#include <memory>
#include <mutex>

namespace cpdit::pipeline::testing {

// The Wan 2.1 fields of a Wan or SkyReels-V2 transformer's config.
inline const models::wan::WanConfig& wan_fields(const models::LoadedModel& transformer) {
  if (transformer.class_name == "SkyReelsV2Transformer3DModel")
    return config_of<models::skyreels_v2::SkyReelsV2Config>(transformer);
  return config_of<models::wan::WanConfig>(transformer);
}

// generate_wan of `options` with `folder`'s transformer/ (and with its boundary, transformer_2/ as
// options.low_noise's model) and scheduler/: rank 0's final latents.
inline Tensor generate_on_ranks(const std::filesystem::path& folder, const Tensor& prompt_embeds,
                                WanGenerateOptions options, int ring, int ulysses, double boundary_timestep = 0) {
  const models::LoadedModel transformer = models::open_model((folder / "transformer").string(), std::nullopt, {});
  std::optional<models::LoadedModel> low_noise;
  if (boundary_timestep > 0)
    low_noise = models::open_model((folder / "transformer_2").string(), std::nullopt, {});
  const UniPCConfig scheduler = UniPCConfig::from_file((folder / "scheduler" / "scheduler_config.json").string());
  Tensor latents;
  std::mutex mutex;
  comm::LocalOptions one_thread_each;
  one_thread_each.threads_per_rank = 1;
  comm::run_local(
      ring * ulysses,
      [&](comm::Communicator& world) {
        comm::Mesh mesh(world.split(0, world.rank()), ring, ulysses, 1);
        std::unique_ptr<nn::Model> model = transformer.replica();
        std::unique_ptr<nn::Model> low = low_noise ? low_noise->replica() : nullptr;
        for (nn::Model* m : {model.get(), low.get()})
          if (m && mesh.flat().size() > 1) m->enable_parallelism(mesh.flat_group(), {ring, ulysses});
        WanGenerateOptions mine = options;
        if (low) mine.low_noise = {low.get(), boundary_timestep, options.low_noise.guidance_scale};
        UniPCMultistepScheduler unipc(scheduler);
        const WanGenerateResult r = generate_wan(*model, wan_fields(transformer), unipc, prompt_embeds, mine);
        std::lock_guard lock(mutex);
        if (world.rank() == 0) latents = r.latents;
      },
      one_thread_each);
  return latents;
}

}  // namespace cpdit::pipeline::testing
