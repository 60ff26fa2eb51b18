#pragma once
// UniPCMultistepScheduler as Wan 2.x uses it (diffusers): flow prediction on flow sigmas with a
// static flow_shift, predicting x0, B(h) = expm1(−h) ("bh2"), a UniC corrector before each UniP
// predictor step, solver order ≤ 2, a final σ of 0. Scalar coefficients are computed in float32 and
// tensors updated in float32 with one rounding per operation, as diffusers does.
//
// The scheduler keeps the last two x0 predictions and the last corrected sample. Every operation is
// token-wise, so each rank runs its own scheduler on its own shard of the latents.
#include <cpdit/core/tensor.hpp>
#include <cpdit/pipeline/scheduler.hpp>

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace cpdit::pipeline {

struct UniPCConfig {
  int64_t num_train_timesteps = 1000;
  double flow_shift = 1.0;
  int solver_order = 2;       // 1 or 2
  bool lower_order_final = true;  // the last step at order 1 (order 2 against σ = 0 is not finite)
  std::vector<int> disable_corrector;  // step indices whose following corrector is skipped
  // Custom σ in place of linspace(1, 1/T, n+1)[:-1] (diffusers' set_timesteps(sigmas=...)), shifted
  // like those in float64. Empty: the default.
  std::vector<double> sigmas;

  // A diffusers scheduler_config.json dict. Unknown keys are ignored; everything that would take a
  // path not implemented here (another prediction_type, no flow sigmas, predict_x0 false, bh1,
  // thresholding, dynamic shifting, karras/exponential/beta sigmas, solver_p, final σ other than
  // zero, solver_order > 2) is refused by name.
  static UniPCConfig from_json(const nlohmann::json& config);
  static UniPCConfig from_file(const std::string& path);
  // Wan 2.1 as diffusers' convert script builds it (flow_shift 3.0; 5.0 for 720p).
  static UniPCConfig wan21(double flow_shift = 3.0);
};

class UniPCMultistepScheduler final : public Scheduler {
 public:
  explicit UniPCMultistepScheduler(UniPCConfig config);

  // σ = linspace(1, 1/T, n+1)[:-1] in float64, shifted, σ_0 = 1 − 1e-6; timesteps trunc(σ·T);
  // sigmas float32 with a terminal 0. Resets the multistep state.
  void set_timesteps(int num_inference_steps);

  const UniPCConfig& config() const { return config_; }
  int num_inference_steps() const { return int(timesteps_.size()); }
  const std::vector<int64_t>& timesteps() const { return timesteps_; }  // what the model is fed
  const std::vector<float>& sigmas() const { return sigmas_; }          // n + 1 values, last 0
  int step_index() const { return step_index_; }  // the step the next step() call performs

  // One step: x0 = sample − σ·model_output, the corrector (from the second step on), then the
  // predictor to the next σ. Returns the new sample in sample's dtype. Shapes must stay the same
  // from step to step.
  Tensor step(const Tensor& model_output, const Tensor& sample);

  // step() as diffusers' SkyReels-V2 diffusion-forcing loop (like the original SkyReels-V2 sampler)
  // drives it: each frame's sample goes in as a view of the latents and the result is written back
  // into that view. After a step without a corrector (the first) the scheduler kept that view as its
  // last sample, so the next corrector starts from the step's result instead of its input.
  Tensor step_in_place(const Tensor& model_output, const Tensor& sample);

  std::unique_ptr<Scheduler> clone() const override;
  void schedule(int steps, int64_t) override { set_timesteps(steps); }
  int steps() const override { return num_inference_steps(); }
  double timestep(int step) const override { return double(timesteps_.at(size_t(step))); }
  float sigma(int step) const override { return sigmas_.at(size_t(step)); }
  // step(model_output, sample) for `step`, which must be step_index(): UniPC starts at step 0.
  Tensor step(const Tensor& model_output, int step, const Tensor& sample, const Tensor& noise) override;

 private:
  bool corrects_now() const;  // whether the next step starts with the UniC corrector

  UniPCConfig config_;
  std::vector<int64_t> timesteps_;
  std::vector<float> sigmas_;
  int step_index_ = 0;
  int lower_order_nums_ = 0;  // steps taken so far, capped at solver_order (the warm-up)
  int this_order_ = 0;        // the order of the last predictor step
  Tensor last_sample_;        // the (corrected) sample the last predictor started from
  Tensor x0_prev_, x0_last_;  // the x0 predictions of the step before last and of the last step
};

}  // namespace cpdit::pipeline
