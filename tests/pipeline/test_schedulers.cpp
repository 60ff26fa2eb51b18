// The schedulers --scheduler picks, against diffusers' own classes (tests/data/fixtures/schedulers, made by
// tools/reference/schedulers.py): each case is built the way cpdit builds it (make_scheduler from FLUX.1-dev's
// or Wan 2.1's schedule with the request's name, --flow-shift and --sigmas), and its timesteps, sigmas and a
// multi-step trajectory on given model outputs (and, for Euler ancestral, the noise diffusers drew) must be
// diffusers'. Then the names, the refusals and the noise of the ancestral step.
#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/pipeline/dpm_solver.hpp>
#include <cpdit/pipeline/make_scheduler.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

namespace cpdit::pipeline {
namespace {

const std::string kDir = std::string(CPDIT_TEST_DATA) + "/fixtures/schedulers/";

const nlohmann::json& fixture() {
  static const nlohmann::json json = io::read_json(kDir + "schedulers.json");
  return json;
}

const std::map<std::string, Tensor>& trajectories() {
  static const auto tensors = io::load_safetensors(kDir + "trajectories.safetensors");
  return tensors;
}

// make_scheduler as a request asks for the case's scheduler, its schedule set as the loops set it.
std::unique_ptr<Scheduler> scheduler_for(const nlohmann::json& c) {
  const nlohmann::json& cpdit = c["cpdit"];
  SchedulerChoice choice;
  choice.name = cpdit["scheduler"].get<std::string>();
  if (!cpdit["flow_shift"].is_null()) choice.flow_shift = cpdit["flow_shift"].get<double>();
  if (!cpdit["sigmas"].is_null()) choice.sigmas = cpdit["sigmas"].get<std::vector<double>>();
  std::unique_ptr<Scheduler> s = cpdit["family"] == "wan21" ? make_scheduler(choice, UniPCConfig::wan21(3.0))
                                                            : make_scheduler(choice, FlowMatchEulerConfig::flux_dev());
  s->schedule(c["steps"].get<int>(), cpdit["image_seq_len"].get<int64_t>());
  return s;
}

}  // namespace

// Exact: timesteps are integers for DPM++ 2M and UniPC, σ·1000 in float32 for flow-match Euler, and sigmas
// the float32 of the same float64 (or float32) values, computed with the same operations in the same order.
TEST(Schedulers, TimestepsAndSigmasAreDiffusers) {
  double worst_timestep = 0, worst_sigma = 0;
  for (const auto& c : fixture()["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const std::unique_ptr<Scheduler> s = scheduler_for(c);
    const auto timesteps = c["timesteps"].get<std::vector<double>>();
    const auto sigmas = c["sigmas"].get<std::vector<double>>();
    ASSERT_EQ(s->steps(), int(timesteps.size()));
    ASSERT_EQ(sigmas.size(), timesteps.size() + 1);
    for (int i = 0; i < s->steps(); ++i) {
      worst_timestep = std::max(worst_timestep, std::fabs(s->timestep(i) - timesteps[size_t(i)]));
      EXPECT_EQ(s->timestep(i), timesteps[size_t(i)]) << "timestep " << i;
    }
    for (int i = 0; i <= s->steps(); ++i) {
      worst_sigma = std::max(worst_sigma, std::fabs(double(s->sigma(i)) - sigmas[size_t(i)]));
      EXPECT_EQ(double(s->sigma(i)), sigmas[size_t(i)]) << "sigma " << i;
    }
  }
  std::printf("timesteps: max |cpdit - diffusers| %.3g; sigmas: %.3g\n", worst_timestep, worst_sigma);
}

// Every sample of each trajectory against diffusers' (samples of magnitude ~3): each step rounds once per
// float32 operation in diffusers' order; what remains is libm's exp/log against torch's (an ulp in λ or
// e^{-h}) carried through up to 20 steps: observed 0 (Euler ancestral), 2.4e-7 (UniPC), 6e-7 (DPM++ 2M).
// 2e-6 is that with room for another libm.
constexpr double kTrajectoryTolerance = 2e-6;

TEST(Schedulers, TrajectoriesAreDiffusers) {
  int cases = 0;
  for (const auto& c : fixture()["cases"]) {
    if (!c.contains("trajectory_steps")) continue;
    ++cases;
    const std::string name = c["name"].get<std::string>();
    SCOPED_TRACE(name);
    const std::unique_ptr<Scheduler> s = scheduler_for(c);
    const auto& t = trajectories();
    Tensor sample = t.at(name + "/sample");
    double worst = 0;
    for (int k = 0; k < c["trajectory_steps"].get<int>(); ++k) {
      const std::string noise_name = name + "/noise_" + std::to_string(k);
      EXPECT_EQ(s->stochastic(), t.count(noise_name) == 1);
      const Tensor noise = t.count(noise_name) ? t.at(noise_name) : Tensor();
      sample = s->step(t.at(name + "/model_output_" + std::to_string(k)), k, sample, noise);
      const double error = max_abs_diff(sample, t.at(name + "/sample_" + std::to_string(k)));
      worst = std::max(worst, error);
      EXPECT_LT(error, kTrajectoryTolerance) << "step " << k;
    }
    std::printf("%-36s %d steps: max |cpdit - diffusers| %.3g\n", name.c_str(), c["trajectory_steps"].get<int>(),
                worst);
  }
  EXPECT_EQ(cases, 8);
}

// The three steps of FLUX.1's DPM++ 2M run: first order, second order, then first order to σ = 0.
TEST(Schedulers, DpmSolverOrdersWarmUpAndEndFirstOrder) {
  DPMSolverConfig c;
  c.flow_shift = 3.0;
  DPMSolverMultistepScheduler s(c);
  s.set_timesteps(3);
  const Tensor x = Tensor::full({4}, 0.5), v = Tensor::full({4}, 0.25);
  // The last step lands on x0 = x − σ·v whatever came before.
  Tensor y = s.step(v, 0, x);
  y = s.step(v, 1, y);
  const Tensor last = s.step(v, 2, y);
  const float x0 = y.data<float>()[0] - s.sigmas()[2] * 0.25f;
  EXPECT_FLOAT_EQ(last.data<float>()[0], x0);
  // Steps run in order.
  s.set_timesteps(3);
  s.step(v, 1, x);  // image-to-image: any first step
  EXPECT_THROW(s.step(v, 1, x), Error);
}

TEST(Schedulers, NamesAndDescriptions) {
  EXPECT_EQ(scheduler_names(), (std::vector<std::string>{"euler", "euler_a", "dpm++2m", "unipc"}));
  EXPECT_EQ(scheduler_description("dpm++2m"), "DPM++ 2M");
  EXPECT_EQ(scheduler_description("euler_a"), "flow-match Euler ancestral");
  const std::string all = family_scheduler_choices();
  EXPECT_NE(all.find("flux: euler (default), euler_a, dpm++2m"), std::string::npos) << all;
  EXPECT_NE(all.find("wan: unipc (default), dpm++2m"), std::string::npos) << all;
  EXPECT_NE(all.find("skyreels_v2: unipc (default)"), std::string::npos) << all;
}

std::string refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "not refused";
  return "";
}

SchedulerChoice choice(const std::string& name, std::optional<double> flow_shift = {},
                       std::vector<double> sigmas = {}) {
  return {name, flow_shift, std::move(sigmas)};
}

TEST(Schedulers, RefusesWhatNoFamilyOrThisFamilyTakes) {
  const std::vector<std::string> flux{"euler", "euler_a", "dpm++2m"};
  EXPECT_NE(refusal([] { check_scheduler_name("bogus"); }).find("--scheduler bogus is unknown; the choices are flux: euler (default)"),
            std::string::npos);
  EXPECT_NE(refusal([&] { check_scheduler_choice(choice("unipc"), flux, "flux"); })
                .find("--scheduler unipc is not for flux; it takes euler (default), euler_a, dpm++2m"),
            std::string::npos);
  check_scheduler_choice(choice(""), flux, "flux");  // the default
  check_scheduler_choice(choice("euler", 2.0, {1.0, 0.5, 0.25}), flux, "flux");
  EXPECT_NE(refusal([&] { check_scheduler_choice(choice("euler", {}, {1.0, 0.5, 0.75}), flux, "flux"); })
                .find("--sigmas must descend: 0.75 (value 3) follows 0.5"),
            std::string::npos);
  EXPECT_NE(refusal([&] { check_scheduler_choice(choice("euler", {}, {1.5, 0.5}), flux, "flux"); }).find("outside (0, 1]"),
            std::string::npos);
  EXPECT_NE(refusal([&] { check_scheduler_choice(choice("dpm++2m", {}, {1.0, 0.5}), flux, "flux"); })
                .find("--sigmas is not for dpm++2m"),
            std::string::npos);
  EXPECT_NE(refusal([&] { check_scheduler_choice(choice("euler", -1.0), flux, "flux"); }).find("--flow-shift must be"),
            std::string::npos);
}

TEST(Schedulers, ParsesSigmas) {
  EXPECT_EQ(parse_sigmas("1.0, 0.75,0.5"), (std::vector<double>{1.0, 0.75, 0.5}));
  EXPECT_NE(refusal([] { parse_sigmas("1.0,abc"); }).find("\"abc\" (value 2) is not a number"), std::string::npos);
  EXPECT_NE(refusal([] { parse_sigmas("1.0,,0.5"); }).find("\"\" (value 2) is not a number"), std::string::npos);
  EXPECT_NE(refusal([] { parse_sigmas(""); }).find("holds no values"), std::string::npos);
  EXPECT_NE(refusal([] { parse_sigmas("1.0,"); }).find("holds no values"), std::string::npos);
}

// Each step of the ancestral sampler has its own noise stream, apart from the initial noise's.
TEST(Schedulers, StepNoiseSeedsDifferByStepAndFromTheSeed) {
  EXPECT_NE(step_noise_seed(0, 0), step_noise_seed(0, 1));
  EXPECT_NE(step_noise_seed(0, 0), step_noise_seed(1, 0));
  EXPECT_NE(step_noise_seed(0, 0), 0u);
  EXPECT_EQ(step_noise_seed(42, 3), step_noise_seed(42, 3));
}

}  // namespace cpdit::pipeline
