#pragma once
// FlowMatchEulerDiscreteScheduler as the FLUX.1 and Qwen-Image pipelines drive it (diffusers): σ from
// 1 down to 1/N, shifted (statically, or dynamically by μ from the image token count), optionally
// stretched so the last σ is `shift_terminal`, then Euler steps x ← x + (σ_{i+1} − σ_i)·v.
// Timesteps, sigmas and steps round in float32 exactly where diffusers does. The step is token-wise,
// so each rank steps its own shard of the latents.
#include <cpdit/core/tensor.hpp>
#include <cpdit/pipeline/scheduler.hpp>

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cpdit::pipeline {

struct FlowMatchEulerConfig {
  enum class TimeShift { exponential, linear };

  int64_t num_train_timesteps = 1000;
  double shift = 1.0;  // the static shift; ignored when use_dynamic_shifting
  bool use_dynamic_shifting = false;
  TimeShift time_shift_type = TimeShift::exponential;
  // The line that maps the image token count to μ (the Flux pipeline's calculate_shift).
  double base_shift = 0.5, max_shift = 1.15;
  int64_t base_image_seq_len = 256, max_image_seq_len = 4096;
  // 0 (config null): off. Otherwise the shifted σ are stretched, 1 − σ scaled so the last σ equals
  // it (Qwen-Image 0.02, LTX-Video 0.1).
  double shift_terminal = 0.0;
  // stochastic_sampling (the ancestral sampler, cpdit's "euler_a"): each step predicts x0 = x − σ·v and
  // re-noises it to the next σ, x ← (1 − σ_{i+1})·x0 + σ_{i+1}·noise.
  bool stochastic_sampling = false;
  // Custom σ in place of linspace(1, 1/n, n) (diffusers' set_timesteps(sigmas=...)): cast to float32,
  // then shifted and stretched like the default ones. Empty: the default.
  std::vector<double> sigmas;

  // A diffusers scheduler_config.json dict. Unknown keys are ignored; options that change the
  // schedule and are not implemented (karras / exponential / beta sigmas, invert_sigmas) are refused
  // by name.
  static FlowMatchEulerConfig from_json(const nlohmann::json& config);
  static FlowMatchEulerConfig from_file(const std::string& path);
  // The values FLUX.1-dev / FLUX.1-schnell ship in scheduler/scheduler_config.json, for the
  // built-in presets that have no scheduler folder.
  static FlowMatchEulerConfig flux_dev();
  static FlowMatchEulerConfig flux_schnell();
  // Qwen-Image's: dynamic exponential shift on 256..8192 tokens from 0.5 to 0.9, shift_terminal 0.02.
  static FlowMatchEulerConfig qwenimage();
  // LTX-Video's: dynamic exponential shift on 1024..4096 tokens from 0.95 to 2.05, shift_terminal 0.1.
  static FlowMatchEulerConfig ltx_video();

  // μ for an image of `image_seq_len` tokens, in float64 as the Flux pipeline computes it.
  double mu(int64_t image_seq_len) const;
  // Refuses a step count set_timesteps refuses with every μ: fewer than 1, or 1 with shift_terminal
  // (its only σ is 1, which the stretch cannot move), so a caller can refuse it before loading a model.
  void check_steps(int num_inference_steps) const;
};

class FlowMatchEulerScheduler final : public Scheduler {
 public:
  explicit FlowMatchEulerScheduler(FlowMatchEulerConfig config);

  // The Flux and Qwen-Image pipelines' schedule: σ_in = linspace(1, 1/n, n) (float64, cast to
  // float32 before the shift). `mu` is required with dynamic shifting and ignored without. With
  // shift_terminal, a schedule whose last shifted σ is 1 (one step) is refused: the stretch divides
  // by 1 − σ_last (diffusers returns NaN there). With custom sigmas, their count must be
  // num_inference_steps.
  void set_timesteps(int num_inference_steps, std::optional<double> mu = std::nullopt);

  const FlowMatchEulerConfig& config() const { return config_; }
  int num_inference_steps() const { return int(timesteps_.size()); }
  const std::vector<float>& timesteps() const { return timesteps_; }  // n values, σ·1000
  const std::vector<float>& sigmas() const { return sigmas_; }        // n + 1 values, last 0

  // prev = sample + (σ_{i+1} − σ_i)·model_output in float32, returned in model_output's dtype (as
  // diffusers does). Any shape, any slice of the tokens; the two tensors must match in shape.
  Tensor step(const Tensor& model_output, int step_index, const Tensor& sample) const;

  std::unique_ptr<Scheduler> clone() const override;
  void schedule(int steps, int64_t image_seq_len) override;
  int steps() const override { return num_inference_steps(); }
  double timestep(int step) const override { return double(timesteps_.at(size_t(step))); }
  float sigma(int step) const override { return sigmas_.at(size_t(step)); }
  bool stochastic() const override { return config_.stochastic_sampling; }
  // The Euler step, or with stochastic_sampling the ancestral one on `noise` (sample's shape).
  Tensor step(const Tensor& model_output, int step, const Tensor& sample, const Tensor& noise) override;

 private:
  FlowMatchEulerConfig config_;
  std::vector<float> timesteps_, sigmas_;
};

}  // namespace cpdit::pipeline
