#include <cpdit/core/error.hpp>
#include <cpdit/pipeline/dpm_solver.hpp>
#include <cpdit/pipeline/scheduler_common.hpp>

#include <cmath>

namespace cpdit::pipeline {

double DPMSolverConfig::mu(int64_t image_seq_len) const {
  return shift_line_mu(base_shift, max_shift, base_image_seq_len, max_image_seq_len, image_seq_len);
}

DPMSolverMultistepScheduler::DPMSolverMultistepScheduler(DPMSolverConfig config) : config_(std::move(config)) {
  CPDIT_CHECK(config_.solver_order == 1 || config_.solver_order == 2, unsupported,
              "DPMSolverMultistepScheduler: solver_order ", config_.solver_order,
              " is not supported; cpdit implements orders 1 and 2");
  CPDIT_CHECK(config_.num_train_timesteps > 0 && config_.flow_shift > 0, invalid_argument,
              "DPMSolverMultistepScheduler: impossible config (num_train_timesteps ", config_.num_train_timesteps,
              ", flow_shift ", config_.flow_shift, ")");
}

std::unique_ptr<Scheduler> DPMSolverMultistepScheduler::clone() const {
  return std::make_unique<DPMSolverMultistepScheduler>(*this);
}

void DPMSolverMultistepScheduler::schedule(int steps, int64_t image_seq_len) {
  set_timesteps(steps, config_.use_dynamic_shifting ? std::optional<double>(config_.mu(image_seq_len))
                                                    : std::nullopt);
}

// numpy float64, as diffusers' use_flow_sigmas branch: σ = flip(shift(1 − linspace(1, 1/T, n+1)))[:-1].
CPDIT_SEPARATE_ROUNDING void DPMSolverMultistepScheduler::set_timesteps(int num_inference_steps,
                                                                        std::optional<double> mu) {
  CPDIT_CHECK(num_inference_steps >= 1, invalid_argument,
              "DPMSolverMultistepScheduler: the number of steps must be at least 1, got ", num_inference_steps);
  CPDIT_CHECK(!config_.use_dynamic_shifting || mu.has_value(), invalid_argument,
              "DPMSolverMultistepScheduler: dynamic shifting needs mu");
  const int n = num_inference_steps;
  const double train_steps = double(config_.num_train_timesteps);
  const double shift = config_.use_dynamic_shifting ? std::exp(*mu) : config_.flow_shift;
  const std::vector<double> alphas = numpy_linspace(1.0, 1.0 / train_steps, n + 1);
  timesteps_.resize(size_t(n));
  sigmas_.assign(size_t(n) + 1, 0.0f);  // final_sigmas_type "zero"
  for (int i = 0; i < n; ++i) {
    const double s = 1.0 - alphas[size_t(n - i)];
    const double scaled = shift * s;
    const double denominator_part = (shift - 1.0) * s;
    const double sigma = scaled / (1.0 + denominator_part);
    timesteps_[size_t(i)] = int64_t(sigma * train_steps);  // truncation, as torch's float64 → int64
    sigmas_[size_t(i)] = float(sigma);
  }
  next_step_ = -1;
  lower_order_nums_ = 0;
  x0_last_ = Tensor();
}

namespace {

// λ = ln α − ln σ with α = 1 − σ (flow sigmas), in float32; +∞ at σ = 0.
float flow_lambda(float sigma) { return std::log(1.0f - sigma) - std::log(sigma); }

CPDIT_SEPARATE_ROUNDING void flow_x0_prediction(const float* sample, const float* velocity, float sigma, float* out,
                                        int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float scaled = sigma * velocity[i];
    out[i] = sample[i] - scaled;
  }
}

// x_t = (σ_t/σ_s0)·x − α_t(e^{−h} − 1)·D0 [− ½α_t(e^{−h} − 1)·D1, D1 = (m0 − m1)/r0], in diffusers'
// order of operations (the midpoint solver of DPM-Solver++).
CPDIT_SEPARATE_ROUNDING void dpm_update(float sample_scale, float x0_scale, const float* x, const float* m0,
                                        const float* m1, float inverse_r0, float* out, int64_t n) {
  const float d1_scale = 0.5f * x0_scale;
  for (int64_t i = 0; i < n; ++i) {
    const float scaled_x = sample_scale * x[i];
    const float scaled_m0 = x0_scale * m0[i];
    const float first = scaled_x - scaled_m0;
    if (m1 == nullptr) {
      out[i] = first;
      continue;
    }
    const float difference = m0[i] - m1[i];
    const float d1 = inverse_r0 * difference;
    const float scaled_d1 = d1_scale * d1;
    out[i] = first - scaled_d1;
  }
}

}  // namespace

CPDIT_SEPARATE_ROUNDING Tensor DPMSolverMultistepScheduler::step(const Tensor& model_output, int i,
                                                                 const Tensor& sample_in, const Tensor&) {
  const int n = steps();
  CPDIT_CHECK(i >= 0 && i < n, invalid_argument, "DPMSolverMultistepScheduler::step: step ", i, " is outside 0..",
              n - 1, " (call set_timesteps first)");
  CPDIT_CHECK(next_step_ < 0 || i == next_step_, invalid_argument, "DPMSolverMultistepScheduler::step: step ", i,
              " after step ", next_step_ - 1, "; steps run in order");
  CPDIT_CHECK(model_output.shape() == sample_in.shape(), invalid_argument,
              "DPMSolverMultistepScheduler::step: model output ", model_output.describe(), " and sample ",
              sample_in.describe(), " must have the same shape");
  CPDIT_CHECK(!x0_last_.defined() || x0_last_.shape() == sample_in.shape(), invalid_argument,
              "DPMSolverMultistepScheduler::step: sample ", sample_in.describe(),
              " changed shape since the previous step ", x0_last_.describe());
  const Tensor v = model_output.to(DType::f32), sample = sample_in.to(DType::f32);
  const int64_t count = sample.numel();
  const float* sig = sigmas_.data();

  Tensor x0 = Tensor::empty(sample.shape(), DType::f32);
  flow_x0_prediction(sample.data<float>(), v.data<float>(), sig[i], x0.data<float>(), count);

  // The last step (to σ = 0) is first order: final_sigmas_type "zero".
  const bool second_order = config_.solver_order == 2 && lower_order_nums_ >= 1 && i != n - 1;
  const float sigma_t = sig[i + 1], sigma_s0 = sig[i];
  const float alpha_t = 1.0f - sigma_t;
  const float lambda_s0 = flow_lambda(sigma_s0);
  const float h = flow_lambda(sigma_t) - lambda_s0;
  const float phi = std::exp(-h) - 1.0f;
  const float x0_scale = alpha_t * phi;
  float inverse_r0 = 0.0f;
  if (second_order) {
    const float h_0 = lambda_s0 - flow_lambda(sig[i - 1]);
    const float r0 = h_0 / h;
    inverse_r0 = 1.0f / r0;
  }
  Tensor next = Tensor::empty(sample.shape(), DType::f32);
  dpm_update(sigma_t / sigma_s0, x0_scale, sample.data<float>(), x0.data<float>(),
             second_order ? x0_last_.data<float>() : nullptr, inverse_r0, next.data<float>(), count);

  x0_last_ = x0;
  if (lower_order_nums_ < config_.solver_order) ++lower_order_nums_;
  next_step_ = i + 1;
  return next.to(model_output.dtype());
}

}  // namespace cpdit::pipeline
