#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/pipeline/flow_match_euler.hpp>
#include <cpdit/pipeline/scheduler_common.hpp>

#include <cmath>

namespace cpdit::pipeline {

FlowMatchEulerConfig FlowMatchEulerConfig::from_json(const nlohmann::json& config) {
  require_scheduler_class(config, "FlowMatchEulerDiscreteScheduler");
  for (const char* key : {"use_karras_sigmas", "use_exponential_sigmas", "use_beta_sigmas",
                          "invert_sigmas"}) {
    CPDIT_CHECK(!config_flag(config, key, false), unsupported, "FlowMatchEulerDiscreteScheduler: \"",
                key, "\": true is not supported; set it to false");
  }
  FlowMatchEulerConfig c;
  c.num_train_timesteps = config_integer(config, "num_train_timesteps", c.num_train_timesteps);
  c.shift = config_number(config, "shift", c.shift);
  c.use_dynamic_shifting = config_flag(config, "use_dynamic_shifting", c.use_dynamic_shifting);
  c.base_shift = config_number(config, "base_shift", c.base_shift);
  c.max_shift = config_number(config, "max_shift", c.max_shift);
  c.base_image_seq_len = config_integer(config, "base_image_seq_len", c.base_image_seq_len);
  c.max_image_seq_len = config_integer(config, "max_image_seq_len", c.max_image_seq_len);
  c.shift_terminal = config_number(config, "shift_terminal", c.shift_terminal);
  c.stochastic_sampling = config_flag(config, "stochastic_sampling", c.stochastic_sampling);
  const std::string shift_type = config_string(config, "time_shift_type", "exponential");
  if (shift_type == "exponential") {
    c.time_shift_type = TimeShift::exponential;
  } else if (shift_type == "linear") {
    c.time_shift_type = TimeShift::linear;
  } else {
    fail(ErrorKind::format, "FlowMatchEulerDiscreteScheduler: \"time_shift_type\" must be ",
         "\"exponential\" or \"linear\", got \"", shift_type, "\"");
  }
  CPDIT_CHECK(c.num_train_timesteps > 0 && c.shift > 0 &&
                  c.max_image_seq_len != c.base_image_seq_len && c.shift_terminal >= 0 && c.shift_terminal < 1,
              format, "FlowMatchEulerDiscreteScheduler: impossible config (num_train_timesteps ",
              c.num_train_timesteps, ", shift ", c.shift, ", base/max_image_seq_len ",
              c.base_image_seq_len, "/", c.max_image_seq_len, ", shift_terminal ", c.shift_terminal,
              " outside [0, 1))");
  return c;
}

FlowMatchEulerConfig FlowMatchEulerConfig::from_file(const std::string& path) {
  return from_json(io::read_json(path));
}

FlowMatchEulerConfig FlowMatchEulerConfig::flux_dev() {
  FlowMatchEulerConfig c;
  c.shift = 3.0;
  c.use_dynamic_shifting = true;
  return c;
}

FlowMatchEulerConfig FlowMatchEulerConfig::flux_schnell() { return FlowMatchEulerConfig{}; }

namespace {

// Dynamic exponential shift: μ on the line from (base_len, base_shift) to (max_len, max_shift).
FlowMatchEulerConfig dynamic_shift(double base_shift, double max_shift, int64_t base_len, int64_t max_len,
                                   double shift_terminal) {
  FlowMatchEulerConfig c;
  c.use_dynamic_shifting = true;
  c.base_shift = base_shift;
  c.max_shift = max_shift;
  c.base_image_seq_len = base_len;
  c.max_image_seq_len = max_len;
  c.shift_terminal = shift_terminal;
  return c;
}

}  // namespace

FlowMatchEulerConfig FlowMatchEulerConfig::qwenimage() { return dynamic_shift(0.5, 0.9, 256, 8192, 0.02); }
FlowMatchEulerConfig FlowMatchEulerConfig::ltx_video() { return dynamic_shift(0.95, 2.05, 1024, 4096, 0.1); }

double FlowMatchEulerConfig::mu(int64_t image_seq_len) const {
  return shift_line_mu(base_shift, max_shift, base_image_seq_len, max_image_seq_len, image_seq_len);
}

FlowMatchEulerScheduler::FlowMatchEulerScheduler(FlowMatchEulerConfig config)
    : config_(std::move(config)) {}

namespace {

// The shift of one float32 σ, in numpy float32 arithmetic: Python floats meet a float32 array as
// float32 values, and (1/σ − 1)^1.0 is exact.
CPDIT_SEPARATE_ROUNDING float shifted_sigma(const FlowMatchEulerConfig& c, std::optional<double> mu,
                                            float sigma) {
  if (!c.use_dynamic_shifting) {
    const float scaled = float(c.shift) * sigma;
    const float denominator_part = float(c.shift - 1.0) * sigma;
    return scaled / (1.0f + denominator_part);
  }
  const float odds = 1.0f / sigma - 1.0f;
  const float numerator =
      c.time_shift_type == FlowMatchEulerConfig::TimeShift::exponential ? float(std::exp(*mu)) : float(*mu);
  return numerator / (numerator + odds);
}

// stretch_shift_to_terminal in numpy float32: 1 − σ scaled by (1 − σ_last)/(1 − terminal), with the
// Python float 1 − terminal meeting the float32 scalar as a float32.
CPDIT_SEPARATE_ROUNDING void stretch_to_terminal(std::vector<float>& sigmas, double terminal) {
  const float last_gap = 1.0f - sigmas.back();
  CPDIT_CHECK(last_gap > 0.0f, invalid_argument, "FlowMatchEulerScheduler: shift_terminal ", terminal,
              " needs a schedule that ends below sigma 1 (use at least 2 steps)");
  const float scale = last_gap / float(1.0 - terminal);
  for (float& s : sigmas) {
    const float gap = 1.0f - s;
    s = 1.0f - gap / scale;
  }
}

}  // namespace

void FlowMatchEulerConfig::check_steps(int num_inference_steps) const {
  CPDIT_CHECK(num_inference_steps >= 1, invalid_argument,
              "FlowMatchEulerScheduler: the number of steps must be at least 1, got ", num_inference_steps);
  CPDIT_CHECK(shift_terminal == 0.0 || num_inference_steps >= 2, invalid_argument,
              "FlowMatchEulerScheduler: shift_terminal ", shift_terminal,
              " needs a schedule that ends below sigma 1 (use at least 2 steps)");
}

void FlowMatchEulerScheduler::set_timesteps(int num_inference_steps, std::optional<double> mu) {
  config_.check_steps(num_inference_steps);
  CPDIT_CHECK(!config_.use_dynamic_shifting || mu.has_value(), invalid_argument,
              "FlowMatchEulerScheduler: dynamic shifting needs mu (FlowMatchEulerConfig::mu of the image "
              "token count)");
  const int n = num_inference_steps;
  CPDIT_CHECK(config_.sigmas.empty() || config_.sigmas.size() == size_t(n), invalid_argument,
              "FlowMatchEulerScheduler: ", config_.sigmas.size(), " custom sigmas for ", n, " steps");
  const std::vector<double> sigmas_in = config_.sigmas.empty() ? numpy_linspace(1.0, 1.0 / n, n) : config_.sigmas;
  const float train_steps = float(config_.num_train_timesteps);
  sigmas_.assign(size_t(n), 0.0f);
  for (int i = 0; i < n; ++i) sigmas_[size_t(i)] = shifted_sigma(config_, mu, float(sigmas_in[size_t(i)]));
  if (config_.shift_terminal != 0.0) stretch_to_terminal(sigmas_, config_.shift_terminal);
  timesteps_.assign(size_t(n), 0.0f);
  for (int i = 0; i < n; ++i) timesteps_[size_t(i)] = sigmas_[size_t(i)] * train_steps;
  sigmas_.push_back(0.0f);  // the terminal σ is 0
}

namespace {

CPDIT_SEPARATE_ROUNDING void euler_update(const float* sample, const float* velocity, float dt,
                                          float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float delta = dt * velocity[i];
    out[i] = sample[i] + delta;
  }
}

}  // namespace

Tensor FlowMatchEulerScheduler::step(const Tensor& model_output, int step_index,
                                     const Tensor& sample) const {
  CPDIT_CHECK(step_index >= 0 && step_index < num_inference_steps(), invalid_argument,
              "FlowMatchEulerScheduler::step: step index ", step_index, " is outside 0..",
              num_inference_steps() - 1, " (call set_timesteps first)");
  CPDIT_CHECK(model_output.shape() == sample.shape(), invalid_argument,
              "FlowMatchEulerScheduler::step: model output ", model_output.describe(),
              " and sample ", sample.describe(), " must have the same shape");
  const float dt = sigmas_[size_t(step_index) + 1] - sigmas_[size_t(step_index)];
  const Tensor x = sample.to(DType::f32), v = model_output.to(DType::f32);
  Tensor out = Tensor::empty(sample.shape(), DType::f32);
  euler_update(x.data<float>(), v.data<float>(), dt, out.data<float>(), out.numel());
  return out.to(model_output.dtype());
}

std::unique_ptr<Scheduler> FlowMatchEulerScheduler::clone() const {
  return std::make_unique<FlowMatchEulerScheduler>(*this);
}

void FlowMatchEulerScheduler::schedule(int steps, int64_t image_seq_len) {
  set_timesteps(steps, config_.use_dynamic_shifting ? std::optional<double>(config_.mu(image_seq_len))
                                                    : std::nullopt);
}

namespace {

// x0 = x − σ·v, then (1 − σ_next)·x0 + σ_next·noise, one float32 rounding per operation as diffusers.
CPDIT_SEPARATE_ROUNDING void ancestral_update(const float* sample, const float* velocity, const float* noise,
                                              float sigma, float sigma_next, float* out, int64_t n) {
  const float keep = 1.0f - sigma_next;
  for (int64_t i = 0; i < n; ++i) {
    const float scaled = sigma * velocity[i];
    const float x0 = sample[i] - scaled;
    const float kept = keep * x0;
    const float added = sigma_next * noise[i];
    out[i] = kept + added;
  }
}

}  // namespace

Tensor FlowMatchEulerScheduler::step(const Tensor& model_output, int step_index, const Tensor& sample,
                                     const Tensor& noise) {
  if (!config_.stochastic_sampling) return step(model_output, step_index, sample);
  CPDIT_CHECK(step_index >= 0 && step_index < num_inference_steps(), invalid_argument,
              "FlowMatchEulerScheduler::step: step index ", step_index, " is outside 0..",
              num_inference_steps() - 1, " (call set_timesteps first)");
  CPDIT_CHECK(model_output.shape() == sample.shape() && noise.defined() && noise.shape() == sample.shape(),
              invalid_argument, "FlowMatchEulerScheduler::step: model output ", model_output.describe(),
              ", sample ", sample.describe(), " and noise ", noise.describe(), " must have the same shape");
  const Tensor x = sample.to(DType::f32), v = model_output.to(DType::f32), z = noise.to(DType::f32);
  Tensor out = Tensor::empty(sample.shape(), DType::f32);
  ancestral_update(x.data<float>(), v.data<float>(), z.data<float>(), sigmas_[size_t(step_index)],
                   sigmas_[size_t(step_index) + 1], out.data<float>(), out.numel());
  return out.to(model_output.dtype());
}

}  // namespace cpdit::pipeline
