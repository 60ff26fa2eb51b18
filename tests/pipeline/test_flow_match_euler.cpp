// FlowMatchEulerScheduler against diffusers' own numbers: timesteps, sigmas and step results for the
// FLUX.1-dev (dynamic shift) and schnell (static) configs (tests/data/fixtures/scheduler), and for
// Qwen-Image's and LTX-Video's (dynamic shift with shift_terminal) and a static shift with a terminal
// (tests/data/fixtures/scheduler_shift_terminal, made by tools/reference/flow_match_shift_terminal.py).
#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/pipeline/flow_match_euler.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

using namespace cpdit;
using pipeline::FlowMatchEulerConfig;
using pipeline::FlowMatchEulerScheduler;

namespace {

const std::string kDir = std::string(CPDIT_TEST_DATA) + "/fixtures/scheduler/";
const std::string kTerminalDir = std::string(CPDIT_TEST_DATA) + "/fixtures/scheduler_shift_terminal/";

const nlohmann::json& fixture(const std::string& dir = kDir) {
  static std::map<std::string, nlohmann::json> jsons;
  if (!jsons.count(dir)) jsons[dir] = io::read_json(dir + "scheduler.json");
  return jsons.at(dir);
}

// Both fixture folders: their cases and step tensors share one layout.
const std::vector<std::string> kFixtureDirs{kDir, kTerminalDir};

struct Case {
  std::string dir;
  nlohmann::json json;
};
std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const std::string& dir : kFixtureDirs)
    for (const auto& c : fixture(dir)["cases"]) cases.push_back({dir, c});
  return cases;
}

// Distance in units in the last place between two floats of the same sign.
int64_t ulps(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::llabs(int64_t(ia) - int64_t(ib));
}

FlowMatchEulerScheduler scheduler_for(const nlohmann::json& c, const std::string& dir = kDir) {
  FlowMatchEulerScheduler s(FlowMatchEulerConfig::from_json(fixture(dir)["configs"][c["config"].get<std::string>()]));
  s.set_timesteps(c["num_inference_steps"].get<int>(), s.config().mu(c["image_seq_len"].get<int64_t>()));
  return s;
}

}  // namespace

TEST(FlowMatchEuler, MuFollowsThePipelineLine) {
  for (const auto& [dir, c] : all_cases()) {
    const auto config = FlowMatchEulerConfig::from_json(fixture(dir)["configs"][c["config"].get<std::string>()]);
    EXPECT_EQ(config.mu(c["image_seq_len"].get<int64_t>()), c["mu"].get<double>()) << c["key"];
  }
}

// Tolerance 0 ulp: the float32 operations are the ones numpy/PyTorch perform, in the same order.
TEST(FlowMatchEuler, TimestepsAndSigmasEqualDiffusers) {
  int64_t worst = 0;
  int cases = 0;
  for (const auto& [dir, c] : all_cases()) {
    ++cases;
    const FlowMatchEulerScheduler s = scheduler_for(c, dir);
    const auto timesteps = c["timesteps"].get<std::vector<double>>();
    const auto sigmas = c["sigmas"].get<std::vector<double>>();
    ASSERT_EQ(s.timesteps().size(), timesteps.size()) << c["key"];
    ASSERT_EQ(s.sigmas().size(), sigmas.size()) << c["key"];
    for (size_t i = 0; i < timesteps.size(); ++i) {
      worst = std::max(worst, ulps(s.timesteps()[i], float(timesteps[i])));
      EXPECT_EQ(s.timesteps()[i], float(timesteps[i])) << c["key"] << " timestep " << i;
    }
    for (size_t i = 0; i < sigmas.size(); ++i) {
      worst = std::max(worst, ulps(s.sigmas()[i], float(sigmas[i])));
      EXPECT_EQ(s.sigmas()[i], float(sigmas[i])) << c["key"] << " sigma " << i;
    }
  }
  EXPECT_EQ(cases, 16);
  std::printf("flow-match timesteps/sigmas: max %lld ulp from diffusers over %d cases\n", (long long)worst, cases);
}

TEST(FlowMatchEuler, StepsEqualDiffusers) {
  double worst = 0;
  int checked = 0;
  std::map<std::string, std::map<std::string, Tensor>> tensors_of;
  for (const std::string& dir : kFixtureDirs)
    tensors_of[dir] = io::load_safetensors(dir + "scheduler_steps.safetensors");
  for (const auto& [dir, c] : all_cases()) {
    const auto& tensors = tensors_of.at(dir);
    const FlowMatchEulerScheduler s = scheduler_for(c, dir);
    for (const auto& st : c["steps"]) {
      const int index = st["step_index"].get<int>();
      const std::string prefix = c["key"].get<std::string>() + "/step" + std::to_string(index) + "/";
      EXPECT_EQ(s.sigmas()[size_t(index)], float(st["sigma"].get<double>()));
      EXPECT_EQ(s.sigmas()[size_t(index) + 1], float(st["sigma_next"].get<double>()));
      const Tensor out = s.step(tensors.at(prefix + "model_output"), index, tensors.at(prefix + "sample"));
      const double diff = max_abs_diff(out, tensors.at(prefix + "prev_sample"));
      EXPECT_EQ(diff, 0.0) << prefix;
      worst = std::max(worst, diff);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 24 + 23);
  std::printf("flow-match step: max |prev_sample - diffusers| = %g over %d steps\n", worst, checked);
}

// The step is token-wise: stepping each rank's shard gives the shard of the full step.
TEST(FlowMatchEuler, StepOnShardsEqualsShardsOfStep) {
  const auto tensors = io::load_safetensors(kDir + "scheduler_steps.safetensors");
  const FlowMatchEulerScheduler s = scheduler_for(fixture()["cases"][1]);
  const std::string prefix = "flux_dev/seq1024/steps28/step14/";
  const Tensor sample = tensors.at(prefix + "sample"), velocity = tensors.at(prefix + "model_output");
  const Tensor full = s.step(velocity, 14, sample);
  const auto sizes = split_sizes(sample.size(1), 3);  // 16 tokens over 3 ranks: uneven
  const auto xs = split(sample, 1, 3), vs = split(velocity, 1, 3), fulls = split(full, 1, 3);
  for (size_t r = 0; r < sizes.size(); ++r) {
    EXPECT_EQ(max_abs_diff(s.step(vs[r].contiguous(), 14, xs[r].contiguous()), fulls[r]), 0.0) << r;
  }
}

// Linear time shift (no fixture): σ = μ / (μ + (1/σ_in − 1)), checked against float64.
TEST(FlowMatchEuler, LinearTimeShiftFollowsItsFormula) {
  FlowMatchEulerConfig config = FlowMatchEulerConfig::flux_dev();
  config.time_shift_type = FlowMatchEulerConfig::TimeShift::linear;
  FlowMatchEulerScheduler s(config);
  const double mu = 0.8;
  s.set_timesteps(10, mu);
  for (int i = 0; i < 10; ++i) {
    const double in = 1.0 - i * (1.0 - 0.1) / 9;
    EXPECT_NEAR(s.sigmas()[size_t(i)], mu / (mu + (1 / in - 1)), 1e-6) << i;
  }
  EXPECT_EQ(s.sigmas().back(), 0.0f);
}

TEST(FlowMatchEuler, RefusesWhatItCannotDo) {
  auto config = fixture()["configs"]["flux_dev"];
  FlowMatchEulerScheduler s(FlowMatchEulerConfig::from_json(config));
  EXPECT_THROW(s.set_timesteps(4), Error);  // dynamic shifting without mu
  EXPECT_THROW(s.set_timesteps(0, 1.0), Error);
  s.set_timesteps(4, 1.0);
  EXPECT_THROW(s.step(Tensor::zeros({1, 4}), 4, Tensor::zeros({1, 4})), Error);
  EXPECT_THROW(s.step(Tensor::zeros({1, 4}), 0, Tensor::zeros({1, 5})), Error);

  config["use_karras_sigmas"] = true;
  EXPECT_THROW(FlowMatchEulerConfig::from_json(config), Error);
  config["use_karras_sigmas"] = false;
  config["shift_terminal"] = 1.0;  // the stretch divides by 1 - shift_terminal
  EXPECT_THROW(FlowMatchEulerConfig::from_json(config), Error);
  config["shift_terminal"] = 0.02;
  FlowMatchEulerScheduler terminal(FlowMatchEulerConfig::from_json(config));
  EXPECT_THROW(terminal.set_timesteps(1, 1.0), Error);  // σ_last = 1: diffusers' stretch gives NaN
  // check_steps refuses it without a schedule (before a model is loaded), and only it.
  EXPECT_THROW(terminal.config().check_steps(1), Error);
  EXPECT_NO_THROW(terminal.config().check_steps(2));
  EXPECT_NO_THROW(FlowMatchEulerConfig::flux_dev().check_steps(1));
  EXPECT_THROW(FlowMatchEulerConfig::flux_dev().check_steps(0), Error);
  config["shift_terminal"] = nullptr;
  config["shift"] = "three";
  EXPECT_THROW(FlowMatchEulerConfig::from_json(config), Error);
  config["shift"] = 3.0;
  config["some_future_key"] = 1;  // unknown keys are ignored
  EXPECT_NO_THROW(FlowMatchEulerConfig::from_json(config));
}

TEST(FlowMatchEuler, PresetsMatchTheShippedConfigs) {
  const auto dev = FlowMatchEulerConfig::flux_dev();
  const auto shipped = FlowMatchEulerConfig::from_json(fixture()["configs"]["flux_dev"]);
  EXPECT_EQ(dev.shift, shipped.shift);
  EXPECT_EQ(dev.use_dynamic_shifting, shipped.use_dynamic_shifting);
  EXPECT_EQ(dev.mu(4096), shipped.mu(4096));
  const auto schnell = FlowMatchEulerConfig::flux_schnell();
  EXPECT_EQ(schnell.shift, 1.0);
  EXPECT_FALSE(schnell.use_dynamic_shifting);
  const auto qwen = FlowMatchEulerConfig::qwenimage();
  const auto qwen_shipped = FlowMatchEulerConfig::from_json(fixture(kTerminalDir)["configs"]["qwenimage"]);
  EXPECT_EQ(qwen.use_dynamic_shifting, qwen_shipped.use_dynamic_shifting);
  EXPECT_EQ(qwen.shift_terminal, qwen_shipped.shift_terminal);
  EXPECT_EQ(qwen.mu(4096), qwen_shipped.mu(4096));
  EXPECT_EQ(qwen.mu(16384), qwen_shipped.mu(16384));
}
