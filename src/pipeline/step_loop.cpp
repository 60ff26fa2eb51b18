#include <cpdit/pipeline/step_loop.hpp>

#include <cpdit/core/error.hpp>
#include <cpdit/parallel/shard.hpp>

#include <chrono>

namespace cpdit::pipeline {

void run_steps(int first, int end, const std::function<void(int)>& step, const StepHook& hook, int total,
               std::vector<double>& seconds, const LoopLatents& latents) {
  for (int i = first; i < end; ++i) {
    const auto start = std::chrono::steady_clock::now();
    step(i);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (!hook) continue;
    const StepLatents after{latents.latents, latents.split_dim, latents.group,
                            latents.timestep ? latents.timestep(i) : 0.0};
    if (!hook(int(seconds.size()) - 1, total, seconds.back(), after)) return;
  }
}

void edit_step_latents(const LatentsEdit& edit, int step, const StepLatents& at, comm::Communicator& world) {
  CPDIT_CHECK(at.latents != nullptr, invalid_argument,
              "a step callback on the latents is for FLUX.1, Qwen-Image, LTX-Video, Wan and SkyReels-V2 image-to-video; "
              "SkyReels-V2 diffusion forcing steps its latent frames apart");
  Tensor& mine = *at.latents;
  const bool split = at.split_dim >= 0 && at.group != nullptr && at.group->size() > 1;
  const Tensor whole = split ? parallel::gather(mine, at.split_dim, *at.group) : mine;
  std::optional<Tensor> edited = edit ? edit(step, at.timestep, whole) : std::nullopt;
  if (edited) {
    CPDIT_CHECK(edited->shape() == whole.shape(), invalid_argument, "the step callback returned latents ",
                edited->describe(), " after step ", step, "; the loop's are ", whole.describe());
    edited = edited->to(DType::f32).contiguous();
  }
  if (world.size() > 1) {
    int64_t replaced = edited.has_value();
    world.broadcast(&replaced, sizeof replaced, 0);
    if (replaced == 0) return;
    if (!edited) edited = Tensor::empty(whole.shape(), DType::f32);
    world.broadcast(edited->data<float>(), edited->nbytes(), 0);
  }
  if (edited) mine = split ? parallel::shard(*edited, at.split_dim, *at.group) : *edited;
}

}  // namespace cpdit::pipeline
