#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/pipeline/scheduler_common.hpp>
#include <cpdit/pipeline/unipc.hpp>

#include <algorithm>
#include <array>
#include <cmath>

namespace cpdit::pipeline {

UniPCConfig UniPCConfig::from_json(const nlohmann::json& config) {
  require_scheduler_class(config, "UniPCMultistepScheduler");
  const auto require_string = [&](const char* key, const char* fallback, const char* wanted) {
    const std::string value = config_string(config, key, fallback);
    CPDIT_CHECK(value == wanted, unsupported, "UniPCMultistepScheduler: \"", key, "\" \"", value,
                "\" is not supported; cpdit implements \"", wanted, "\"");
  };
  const auto require_flag = [&](const char* key, bool fallback, bool wanted) {
    CPDIT_CHECK(config_flag(config, key, fallback) == wanted, unsupported,
                "UniPCMultistepScheduler: \"", key, "\" must be ", wanted ? "true" : "false",
                " (the only setting cpdit implements)");
  };
  require_string("prediction_type", "epsilon", "flow_prediction");
  require_string("solver_type", "bh2", "bh2");
  require_string("final_sigmas_type", "zero", "zero");
  require_flag("use_flow_sigmas", false, true);
  require_flag("predict_x0", true, true);
  for (const char* key : {"thresholding", "use_dynamic_shifting", "use_karras_sigmas",
                          "use_exponential_sigmas", "use_beta_sigmas"}) {
    require_flag(key, false, false);
  }
  CPDIT_CHECK(!config.contains("solver_p") || config["solver_p"].is_null(), unsupported,
              "UniPCMultistepScheduler: \"solver_p\" is not supported; set it to null");
  CPDIT_CHECK(config_number(config, "shift_terminal", 0.0) == 0.0, unsupported,
              "UniPCMultistepScheduler: \"shift_terminal\" is not supported; set it to null");

  UniPCConfig c;
  c.num_train_timesteps = config_integer(config, "num_train_timesteps", c.num_train_timesteps);
  c.flow_shift = config_number(config, "flow_shift", c.flow_shift);
  c.solver_order = int(config_integer(config, "solver_order", c.solver_order));
  c.lower_order_final = config_flag(config, "lower_order_final", c.lower_order_final);
  if (auto it = config.find("disable_corrector"); it != config.end() && !it->is_null()) {
    CPDIT_CHECK(it->is_array(), format,
                "UniPCMultistepScheduler: \"disable_corrector\" must be a list of step indices");
    for (const auto& step : *it) {
      CPDIT_CHECK(step.is_number_integer(), format,
                  "UniPCMultistepScheduler: \"disable_corrector\" must hold integers, got ", step.dump());
      c.disable_corrector.push_back(step.get<int>());
    }
  }
  CPDIT_CHECK(c.solver_order == 1 || c.solver_order == 2, unsupported,
              "UniPCMultistepScheduler: solver_order ", c.solver_order,
              " is not supported; cpdit implements orders 1 and 2");
  CPDIT_CHECK(c.num_train_timesteps > 0 && c.flow_shift > 0, format,
              "UniPCMultistepScheduler: impossible config (num_train_timesteps ",
              c.num_train_timesteps, ", flow_shift ", c.flow_shift, ")");
  return c;
}

UniPCConfig UniPCConfig::from_file(const std::string& path) { return from_json(io::read_json(path)); }

UniPCConfig UniPCConfig::wan21(double flow_shift) {
  UniPCConfig c;
  c.flow_shift = flow_shift;
  return c;
}

UniPCMultistepScheduler::UniPCMultistepScheduler(UniPCConfig config) : config_(std::move(config)) {}

CPDIT_SEPARATE_ROUNDING void UniPCMultistepScheduler::set_timesteps(int num_inference_steps) {
  CPDIT_CHECK(num_inference_steps >= 1, invalid_argument,
              "UniPCMultistepScheduler: the number of steps must be at least 1, got ", num_inference_steps);
  const int n = num_inference_steps;
  const double train_steps = double(config_.num_train_timesteps);
  const double shift = config_.flow_shift;
  CPDIT_CHECK(config_.sigmas.empty() || config_.sigmas.size() == size_t(n), invalid_argument,
              "UniPCMultistepScheduler: ", config_.sigmas.size(), " custom sigmas for ", n, " steps");
  std::vector<double> sigmas = config_.sigmas;
  if (sigmas.empty()) {
    sigmas = numpy_linspace(1.0, 1.0 / train_steps, n + 1);
    sigmas.pop_back();
  }
  for (double& s : sigmas) {
    const double scaled = shift * s;
    const double denominator_part = (shift - 1.0) * s;
    s = scaled / (1.0 + denominator_part);
  }
  // σ = 1 would make α = 0 and λ = −∞ at the first step.
  constexpr double kEps = 1e-6;
  if (std::fabs(sigmas[0] - 1.0) < kEps) sigmas[0] -= kEps;

  timesteps_.resize(size_t(n));
  sigmas_.assign(size_t(n) + 1, 0.0f);  // final_sigmas_type "zero"
  for (int i = 0; i < n; ++i) {
    timesteps_[size_t(i)] = int64_t(sigmas[size_t(i)] * train_steps);  // truncation, as numpy → int64
    sigmas_[size_t(i)] = float(sigmas[size_t(i)]);
  }
  step_index_ = 0;
  lower_order_nums_ = 0;
  this_order_ = 0;
  last_sample_ = Tensor();
  x0_prev_ = x0_last_ = Tensor();
}

namespace {

// λ = ln α − ln σ with α = 1 − σ (flow sigmas), in float32; +∞ at σ = 0.
float lambda_of(float sigma) { return std::log(1.0f - sigma) - std::log(sigma); }

// The scalars of one UniPC update from σ_s0 (where x0_s0 was predicted) to σ_t, float32 as diffusers.
struct Coefficients {
  float sample_scale;  // σ_t / σ_s0
  float x0_scale;      // α_t · φ,  φ = expm1(−h)
  float residual_scale;  // α_t · B(h),  B(h) = expm1(−h) for bh2
  float hh, b_h;  // −h and B(h), for the corrector's ρ
};

CPDIT_SEPARATE_ROUNDING Coefficients coefficients(float sigma_s0, float sigma_t) {
  const float alpha_t = 1.0f - sigma_t;
  const float h = lambda_of(sigma_t) - lambda_of(sigma_s0);
  const float hh = -h;  // predict_x0
  const float h_phi_1 = std::expm1(hh);
  const float b_h = std::expm1(hh);
  return {sigma_t / sigma_s0, alpha_t * h_phi_1, alpha_t * b_h, hh, b_h};
}

// ρ of the order-2 corrector: solve([[1, 1], [r, 1]], b) with b_k = g_k·k!/B(h),
// g_1 = φ/(−h) − 1, g_2 = g_1/(−h) − 1/2, by LU with partial pivoting in float32 as LAPACK's
// sgesv (which torch.linalg.solve calls) does.
CPDIT_SEPARATE_ROUNDING std::array<float, 2> corrector_rhos(const Coefficients& c, float r) {
  const float h_phi_1 = c.b_h;  // bh2: B(h) = φ
  float h_phi_k = h_phi_1 / c.hh - 1.0f;
  std::array<float, 2> b;
  b[0] = (h_phi_k * 1.0f) / c.b_h;
  h_phi_k = h_phi_k / c.hh - 0.5f;
  b[1] = (h_phi_k * 2.0f) / c.b_h;

  float a[2][2] = {{1.0f, 1.0f}, {r, 1.0f}};
  if (std::fabs(a[1][0]) > std::fabs(a[0][0])) {
    std::swap(a[0], a[1]);
    std::swap(b[0], b[1]);
  }
  const float multiplier = a[1][0] * (1.0f / a[0][0]);
  const float u11_part = multiplier * a[0][1];
  const float u11 = a[1][1] - u11_part;
  const float y1_part = multiplier * b[0];
  const float y1 = b[1] - y1_part;
  const float x1 = y1 / u11;
  const float x0_part = a[0][1] * x1;
  const float x0 = (b[0] - x0_part) / a[0][0];
  return {x0, x1};
}

// out = σ_t/σ_s0 · x − α_t·φ · m0 − α_t·B(h) · residual, where the residual sums
//   ρ_d · (older − m0) / r    (the D1 term, when `older` is given) and
//   ρ_t · (x0_now − m0)       (the corrector's own term, when `x0_now` is given);
// one float32 rounding per operation in diffusers' order.
struct Residual {
  const float* older = nullptr;
  float r = 1.0f, rho_d = 0.0f;
  const float* x0_now = nullptr;
  float rho_t = 0.0f;
};

CPDIT_SEPARATE_ROUNDING void unipc_update(const Coefficients& c, const float* x, const float* m0,
                                          const Residual& res, float* out, int64_t n) {
  const bool has_d1 = res.older != nullptr, has_now = res.x0_now != nullptr;
  for (int64_t i = 0; i < n; ++i) {
    const float scaled_x = c.sample_scale * x[i];
    const float scaled_m0 = c.x0_scale * m0[i];
    const float base = scaled_x - scaled_m0;
    if (!has_d1 && !has_now) {
      out[i] = base;
      continue;
    }
    float residual = 0.0f;
    if (has_d1) {
      const float d1 = (res.older[i] - m0[i]) / res.r;
      residual = res.rho_d * d1;
    }
    if (has_now) {
      const float d_now = res.x0_now[i] - m0[i];
      const float term = res.rho_t * d_now;
      residual = has_d1 ? residual + term : term;
    }
    const float correction = c.residual_scale * residual;
    out[i] = base - correction;
  }
}

CPDIT_SEPARATE_ROUNDING void predict_x0(const float* sample, const float* velocity, float sigma,
                                        float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float scaled = sigma * velocity[i];
    out[i] = sample[i] - scaled;
  }
}

}  // namespace

bool UniPCMultistepScheduler::corrects_now() const {
  const int i = step_index_;
  const auto& disabled = config_.disable_corrector;
  return i > 0 && std::find(disabled.begin(), disabled.end(), i - 1) == disabled.end() && last_sample_.defined();
}

Tensor UniPCMultistepScheduler::step_in_place(const Tensor& model_output, const Tensor& sample) {
  const bool corrects = corrects_now();
  Tensor next = step(model_output, sample);
  if (!corrects) last_sample_ = next.to(DType::f32).clone();
  return next;
}

std::unique_ptr<Scheduler> UniPCMultistepScheduler::clone() const {
  return std::make_unique<UniPCMultistepScheduler>(*this);
}

Tensor UniPCMultistepScheduler::step(const Tensor& model_output, int step_index, const Tensor& sample,
                                     const Tensor&) {
  CPDIT_CHECK(step_index == step_index_, invalid_argument, "UniPCMultistepScheduler::step: step ", step_index,
              " where step ", step_index_, " is next; UniPC runs every step from the first");
  return step(model_output, sample);
}

Tensor UniPCMultistepScheduler::step(const Tensor& model_output, const Tensor& sample_in) {
  const int n = num_inference_steps();
  const int i = step_index_;
  CPDIT_CHECK(n > 0 && i < n, invalid_argument, "UniPCMultistepScheduler::step: all ", n,
              " steps are done (call set_timesteps to start again)");
  CPDIT_CHECK(model_output.shape() == sample_in.shape(), invalid_argument,
              "UniPCMultistepScheduler::step: model output ", model_output.describe(), " and sample ",
              sample_in.describe(), " must have the same shape");
  CPDIT_CHECK(!x0_last_.defined() || x0_last_.shape() == sample_in.shape(), invalid_argument,
              "UniPCMultistepScheduler::step: sample ", sample_in.describe(),
              " changed shape since the previous step ", x0_last_.describe());
  const Tensor v = model_output.to(DType::f32);
  Tensor sample = sample_in.to(DType::f32);
  const int64_t count = sample.numel();
  const float* sig = sigmas_.data();

  Tensor x0 = Tensor::empty(sample.shape(), DType::f32);
  predict_x0(sample.data<float>(), v.data<float>(), sig[i], x0.data<float>(), count);

  if (corrects_now()) {
    // UniC: redo the last predictor step with the x0 just predicted at its end.
    const Coefficients c = coefficients(sig[i - 1], sig[i]);
    Residual res;
    res.x0_now = x0.data<float>();
    res.rho_t = 0.5f;
    if (this_order_ == 2) {
      res.older = x0_prev_.data<float>();
      res.r = (lambda_of(sig[i - 2]) - lambda_of(sig[i - 1])) / -c.hh;
      const std::array<float, 2> rhos = corrector_rhos(c, res.r);
      res.rho_d = rhos[0];
      res.rho_t = rhos[1];
    }
    Tensor corrected = Tensor::empty(sample.shape(), DType::f32);
    unipc_update(c, last_sample_.data<float>(), x0_last_.data<float>(), res, corrected.data<float>(),
                 count);
    sample = corrected;
  }

  x0_prev_ = x0_last_;
  x0_last_ = x0;
  const int order = config_.lower_order_final ? std::min(config_.solver_order, n - i)
                                              : config_.solver_order;
  this_order_ = std::min(order, lower_order_nums_ + 1);  // warm-up: order 1 at the first step
  // Kept until the next step: never alias the caller's tensor, which it may overwrite.
  last_sample_ = sample.same_storage(sample_in) ? sample.clone() : sample;

  // UniP: from σ_i to σ_{i+1} with the x0 predictions of this step (and the one before).
  const Coefficients c = coefficients(sig[i], sig[i + 1]);
  Residual res;
  if (this_order_ == 2) {
    res.older = x0_prev_.data<float>();
    res.r = (lambda_of(sig[i - 1]) - lambda_of(sig[i])) / -c.hh;
    res.rho_d = 0.5f;
  }
  Tensor next = Tensor::empty(sample.shape(), DType::f32);
  unipc_update(c, sample.data<float>(), x0.data<float>(), res, next.data<float>(), count);

  lower_order_nums_ = std::min(lower_order_nums_ + 1, config_.solver_order);
  ++step_index_;
  return next.to(sample_in.dtype());
}

}  // namespace cpdit::pipeline
