// UniPCMultistepScheduler against diffusers' own rollouts (tests/data/fixtures/scheduler_unipc):
// timesteps, sigmas and every sample of a full multistep rollout driven by the fixture's documented
// stand-in model, for Wan 2.1's flow_shift 3 and 5 at 10 and 50 steps.
#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/pipeline/scheduler_common.hpp>
#include <cpdit/pipeline/unipc.hpp>

#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>

using namespace cpdit;
using pipeline::UniPCConfig;
using pipeline::UniPCMultistepScheduler;

namespace {

const std::string kDir = std::string(CPDIT_TEST_DATA) + "/fixtures/scheduler_unipc/";

const nlohmann::json& fixture() {
  static const nlohmann::json json = io::read_json(kDir + "scheduler_unipc.json");
  return json;
}

const std::map<std::string, Tensor>& rollouts() {
  static const auto tensors = io::load_safetensors(kDir + "rollout.safetensors");
  return tensors;
}

UniPCMultistepScheduler scheduler_for(const nlohmann::json& c) {
  UniPCMultistepScheduler s(UniPCConfig::from_json(fixture()["configs"][c["config"].get<std::string>()]));
  s.set_timesteps(c["num_inference_steps"].get<int>());
  return s;
}

// The fixture's stand-in model: tau = t/1000 in double; A = f32(0.5 + 0.5 tau), B = f32(0.1 tau),
// C = f32(0.05); out = ((x·A) + B) − ((x·x)·C), one float32 rounding per operation.
CPDIT_SEPARATE_ROUNDING Tensor fake_model(const Tensor& sample, int64_t timestep) {
  const double tau = double(timestep) / 1000.0;
  const double half_tau = 0.5 * tau;
  const float a = float(0.5 + half_tau), b = float(0.1 * tau), c = float(0.05);
  Tensor out = Tensor::empty(sample.shape());
  const float* x = sample.data<float>();
  float* o = out.data<float>();
  for (int64_t i = 0; i < sample.numel(); ++i) {
    const float ax = x[i] * a;
    const float linear = ax + b;
    const float xx = x[i] * x[i];
    const float quadratic = xx * c;
    o[i] = linear - quadratic;
  }
  return out;
}

}  // namespace

// Exact: timesteps are integers and sigmas the float32 of the same float64 values.
TEST(UniPC, TimestepsAndSigmasEqualDiffusers) {
  for (const auto& c : fixture()["cases"]) {
    const UniPCMultistepScheduler s = scheduler_for(c);
    EXPECT_EQ(s.timesteps(), c["timesteps"].get<std::vector<int64_t>>()) << c["key"];
    const auto sigmas = c["sigmas"].get<std::vector<double>>();
    ASSERT_EQ(s.sigmas().size(), sigmas.size()) << c["key"];
    for (size_t i = 0; i < sigmas.size(); ++i) {
      EXPECT_EQ(s.sigmas()[i], float(sigmas[i])) << c["key"] << " sigma " << i;
    }
    const std::string key = c["key"].get<std::string>();
    EXPECT_EQ(max_abs_diff(Tensor::from_vector(s.sigmas(), {int64_t(sigmas.size())}),
                           rollouts().at(key + "/sigmas")),
              0.0);
    const Tensor ts = rollouts().at(key + "/timesteps");
    for (int64_t i = 0; i < ts.numel(); ++i) EXPECT_EQ(s.timesteps()[size_t(i)], ts.data<int64_t>()[i]);
  }
}

// Every per-step sample of every rollout within 2e-5 of diffusers (the fixture README: a correct
// float32 port lands within ~2e-6; dropping the corrector or using order 1 moves it by >1e-3).
TEST(UniPC, RolloutsEqualDiffusers) {
  double worst = 0;
  for (const auto& c : fixture()["cases"]) {
    UniPCMultistepScheduler s = scheduler_for(c);
    const std::string key = c["key"].get<std::string>();
    const Tensor samples = rollouts().at(key + "/samples");
    const Tensor outputs = rollouts().at(key + "/model_outputs");
    Tensor sample = samples.select(0, 0).clone();
    EXPECT_EQ(max_abs_diff(sample, rollouts().at("init_sample")), 0.0);
    double case_worst = 0;
    for (int i = 0; i < s.num_inference_steps(); ++i) {
      ASSERT_EQ(s.step_index(), i);
      const Tensor velocity = fake_model(sample, s.timesteps()[size_t(i)]);
      if (i == 0) {
        EXPECT_EQ(max_abs_diff(velocity, outputs.select(0, 0)), 0.0);
      }
      sample = s.step(velocity, sample);
      const double diff = max_abs_diff(sample, samples.select(0, i + 1));
      EXPECT_LE(diff, 2e-5) << key << " step " << i;
      case_worst = std::max(case_worst, diff);
    }
    std::printf("unipc %s: max |sample - diffusers| over all steps = %.3g\n", key.c_str(), case_worst);
    worst = std::max(worst, case_worst);
  }
  std::printf("unipc: max error over 4 rollouts = %.3g (tolerance 2e-5)\n", worst);
}

// The scheduler is token-wise: three ranks, each running its own scheduler on its (uneven) share of
// the tokens, get exactly the shares of the one-rank rollout.
TEST(UniPC, ShardedRolloutEqualsFullRollout) {
  const auto& c = fixture()["cases"][0];
  UniPCMultistepScheduler full = scheduler_for(c);
  std::vector<UniPCMultistepScheduler> ranks(3, scheduler_for(c));
  Tensor sample = rollouts().at("init_sample").reshape({1, 16, 32});  // 32 tokens of 16 channels
  sample = sample.permute({0, 2, 1});                                 // (B, S, C), as the models hold it
  std::vector<Tensor> shards;
  for (const Tensor& part : split(sample, 1, 3)) shards.push_back(part.contiguous());
  for (int i = 0; i < full.num_inference_steps(); ++i) {
    const int64_t t = full.timesteps()[size_t(i)];
    sample = full.step(fake_model(sample, t), sample);
    for (size_t r = 0; r < ranks.size(); ++r) shards[r] = ranks[r].step(fake_model(shards[r], t), shards[r]);
  }
  const auto expected = split(sample, 1, 3);
  for (size_t r = 0; r < ranks.size(); ++r) EXPECT_EQ(max_abs_diff(shards[r], expected[r]), 0.0) << r;
}

TEST(UniPC, RefusesWhatItCannotDo) {
  auto config = fixture()["configs"]["wan21_flow_shift3"];
  UniPCMultistepScheduler s(UniPCConfig::from_json(config));
  EXPECT_THROW(s.step(Tensor::zeros({2}), Tensor::zeros({2})), Error);  // no set_timesteps yet
  s.set_timesteps(2);
  EXPECT_THROW(s.step(Tensor::zeros({2}), Tensor::zeros({3})), Error);
  s.step(Tensor::zeros({2}), Tensor::zeros({2}));
  EXPECT_THROW(s.step(Tensor::zeros({3}), Tensor::zeros({3})), Error);  // shape changed
  s.step(Tensor::zeros({2}), Tensor::zeros({2}));
  EXPECT_THROW(s.step(Tensor::zeros({2}), Tensor::zeros({2})), Error);  // past the last step

  for (const auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"prediction_type", "epsilon"}, {"use_flow_sigmas", false}, {"solver_type", "bh1"},
           {"predict_x0", false}, {"thresholding", true}, {"final_sigmas_type", "sigma_min"},
           {"solver_order", 3}, {"use_karras_sigmas", true}, {"flow_shift", "3"}}) {
    auto bad = config;
    bad[key] = value;
    EXPECT_THROW(UniPCConfig::from_json(bad), Error) << key;
  }
}

TEST(UniPC, Wan21PresetMatchesTheConvertedConfig) {
  const auto shipped = UniPCConfig::from_json(fixture()["configs"]["wan21_flow_shift5"]);
  const auto preset = UniPCConfig::wan21(5.0);
  EXPECT_EQ(preset.flow_shift, shipped.flow_shift);
  EXPECT_EQ(preset.solver_order, shipped.solver_order);
  EXPECT_EQ(preset.lower_order_final, shipped.lower_order_final);
  EXPECT_EQ(preset.num_train_timesteps, shipped.num_train_timesteps);
}
