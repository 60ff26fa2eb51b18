#pragma once
// DPMSolverMultistepScheduler as diffusers runs it for flow models: use_flow_sigmas, prediction_type
// "flow_prediction", algorithm_type "dpmsolver++", solver_type "midpoint", solver_order ≤ 2,
// final_sigmas_type "zero" (so the last step is first order), lower_order_final. Its σ come from
// linspace(1, 1/T, n+1) shifted by flow_shift (or exp(μ) with dynamic shifting), its timesteps are
// trunc(σ·T). Scalars are float32 0-d tensors in diffusers and tensors are updated in float32 with one
// rounding per operation; this rounds the same way.
//
// The scheduler keeps the last x0 prediction. Every operation is token-wise, so each rank runs its own
// scheduler on its own shard of the latents.
#include <cpdit/pipeline/scheduler.hpp>

#include <cstdint>
#include <optional>
#include <vector>

namespace cpdit::pipeline {

struct DPMSolverConfig {
  int64_t num_train_timesteps = 1000;
  double flow_shift = 1.0;
  int solver_order = 2;           // 1 or 2
  bool lower_order_final = true;  // (with final σ 0 the last step is first order whatever this says)
  // flow_shift = exp(μ), μ on the line from (base_image_seq_len, base_shift) to (max_image_seq_len,
  // max_shift), as FluxPipeline's calculate_shift computes it.
  bool use_dynamic_shifting = false;
  double base_shift = 0.5, max_shift = 1.15;
  int64_t base_image_seq_len = 256, max_image_seq_len = 4096;

  double mu(int64_t image_seq_len) const;
};

class DPMSolverMultistepScheduler final : public Scheduler {
 public:
  explicit DPMSolverMultistepScheduler(DPMSolverConfig config);

  // `mu` is required with dynamic shifting and ignored without. Resets the multistep state.
  void set_timesteps(int num_inference_steps, std::optional<double> mu = std::nullopt);
  const DPMSolverConfig& config() const { return config_; }
  const std::vector<int64_t>& timesteps() const { return timesteps_; }  // n values
  const std::vector<float>& sigmas() const { return sigmas_; }          // n + 1 values, last 0

  std::unique_ptr<Scheduler> clone() const override;
  void schedule(int steps, int64_t image_seq_len) override;
  int steps() const override { return int(timesteps_.size()); }
  double timestep(int step) const override { return double(timesteps_.at(size_t(step))); }
  float sigma(int step) const override { return sigmas_.at(size_t(step)); }
  Tensor step(const Tensor& model_output, int step, const Tensor& sample, const Tensor& noise = {}) override;

 private:
  DPMSolverConfig config_;
  std::vector<int64_t> timesteps_;
  std::vector<float> sigmas_;
  int next_step_ = -1;        // the step the next call must be; -1: none taken yet (any first step)
  int lower_order_nums_ = 0;  // steps taken, capped at solver_order (the warm-up)
  Tensor x0_last_;            // the x0 prediction of the last step
};

}  // namespace cpdit::pipeline
