#pragma once
// The one scheduler interface the denoising loops drive, and the choice of scheduler a request makes.
// Every implementation (flow-match Euler and its ancestral variant, UniPC, DPM++ 2M) works on flow
// sigmas and is token-wise: each rank steps its own shard of the latents with its own scheduler, and a
// stochastic step is given its noise by the loop, drawn for the whole latent and sharded like the
// latents, so every split stays exact.
#include <cpdit/core/tensor.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cpdit::pipeline {

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  virtual std::unique_ptr<Scheduler> clone() const = 0;  // a fresh copy, state included

  // The schedule for `steps` steps (a custom σ list given to the scheduler sets their count).
  // `image_seq_len` sets μ where the schedule shifts dynamically; it is ignored otherwise.
  virtual void schedule(int steps, int64_t image_seq_len) = 0;
  virtual int steps() const = 0;
  virtual double timestep(int step) const = 0;  // what the model is fed at `step` (σ·1000 or its integer part)
  virtual float sigma(int step) const = 0;      // 0..steps; sigma(steps) is 0
  // Whether step() draws on noise (the ancestral sampler); the loop then passes step_noise for each step.
  virtual bool stochastic() const { return false; }

  // From σ_step to σ_{step+1}. Steps run in order, from any first step (image-to-image skips some);
  // multistep schedulers keep what they need from the steps before. `noise` (the sample's shape) is
  // read only by stochastic schedulers. Returns the new sample in model_output's dtype.
  virtual Tensor step(const Tensor& model_output, int step, const Tensor& sample, const Tensor& noise) = 0;
};

// The seed of the noise a stochastic scheduler adds at `step`: a stream of its own for every step,
// apart from the initial noise's (which uses the request's seed itself).
uint64_t step_noise_seed(uint64_t seed, int step);

// The request's choice. Empty name: the family's default.
struct SchedulerChoice {
  std::string name;
  std::optional<double> flow_shift;  // a static shift in place of the family's (dynamic or static) one
  std::vector<double> sigmas;        // custom σ, descending in (0, 1]; empty: the scheduler's own
};

// The names the CLI takes, and each in words as a picture's parameters name it.
const std::vector<std::string>& scheduler_names();
std::string scheduler_description(const std::string& name);

// Each family's --scheduler names, its default first: "flux: euler (default), euler_a, dpm++2m; wan: ...".
std::string family_scheduler_choices();
// Refuses a name no family takes (before any model is opened), listing every family's choices.
void check_scheduler_name(const std::string& name);

// Refuses, in one line listing `family_choices` (the first is the default), a name the family does not
// take, and sigmas that are not descending values in (0, 1] (or with a scheduler that takes none).
// `family` names the family in the message ("FLUX.1").
void check_scheduler_choice(const SchedulerChoice& choice, const std::vector<std::string>& family_choices,
                            const std::string& family);

// "1.0,0.75,0.5" as σ values; anything else (a non-number, an empty list or item) is refused naming it.
std::vector<double> parse_sigmas(const std::string& text);

}  // namespace cpdit::pipeline
