#include <cpdit/core/error.hpp>
#include <cpdit/pipeline/dpm_solver.hpp>
#include <cpdit/pipeline/family.hpp>
#include <cpdit/pipeline/make_scheduler.hpp>
#include <cpdit/pipeline/scheduler.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace cpdit::pipeline {

uint64_t step_noise_seed(uint64_t seed, int step) {
  // splitmix64 of the seed moved by the step: neighbouring steps (and seeds) get unrelated streams.
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (uint64_t(step) + 1) + 0x5eed5a3d1e7ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

const std::vector<std::string>& scheduler_names() {
  static const std::vector<std::string> names{"euler", "euler_a", "dpm++2m", "unipc"};
  return names;
}

std::string scheduler_description(const std::string& name) {
  if (name == "euler") return "flow-match Euler";
  if (name == "euler_a") return "flow-match Euler ancestral";
  if (name == "dpm++2m") return "DPM++ 2M";
  if (name == "unipc") return "UniPC";
  fail(ErrorKind::invalid_argument, "unknown scheduler \"", name, "\"");
}

namespace {

std::string choices_text(const std::vector<std::string>& choices) {
  std::string text;
  for (size_t i = 0; i < choices.size(); ++i) text += (i ? ", " : "") + choices[i] + (i ? "" : " (default)");
  return text;
}

}  // namespace

std::string family_scheduler_choices() {
  std::string text;
  for (const Family* family : families())
    text += (text.empty() ? "" : "; ") + family->name() + ": " + choices_text(family->scheduler_choices());
  return text;
}

void check_scheduler_name(const std::string& name) {
  const auto& names = scheduler_names();
  CPDIT_CHECK(std::count(names.begin(), names.end(), name) > 0, invalid_argument, "--scheduler ", name,
              " is unknown; the choices are ", family_scheduler_choices());
}

void check_scheduler_choice(const SchedulerChoice& choice, const std::vector<std::string>& family_choices,
                            const std::string& family) {
  const std::string& name = choice.name.empty() ? family_choices.front() : choice.name;
  const bool known = std::count(scheduler_names().begin(), scheduler_names().end(), name) > 0;
  CPDIT_CHECK(std::count(family_choices.begin(), family_choices.end(), name) > 0, invalid_argument, "--scheduler ",
              name, known ? " is not for " : " is unknown; ", known ? family + "; it takes " : family + " takes ",
              choices_text(family_choices));
  CPDIT_CHECK(!choice.flow_shift || (std::isfinite(*choice.flow_shift) && *choice.flow_shift > 0), invalid_argument,
              "--flow-shift must be a positive number, got ", choice.flow_shift.value_or(0));
  if (choice.sigmas.empty()) return;
  CPDIT_CHECK(name != "dpm++2m", invalid_argument,
              "--sigmas is not for dpm++2m (diffusers' DPMSolverMultistepScheduler takes no custom sigmas)");
  for (size_t i = 0; i < choice.sigmas.size(); ++i) {
    const double s = choice.sigmas[i];
    CPDIT_CHECK(s > 0 && s <= 1, invalid_argument, "--sigmas: ", s, " (value ", i + 1, ") is outside (0, 1]");
    CPDIT_CHECK(i == 0 || s < choice.sigmas[i - 1], invalid_argument, "--sigmas must descend: ", s, " (value ",
                i + 1, ") follows ", choice.sigmas[i - 1]);
  }
}

std::vector<double> parse_sigmas(const std::string& text) {
  std::vector<double> sigmas;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    const size_t begin = item.find_first_not_of(" \t"), end = item.find_last_not_of(" \t");
    const std::string value = begin == std::string::npos ? "" : item.substr(begin, end - begin + 1);
    char* stop = nullptr;
    const double s = value.empty() ? 0 : std::strtod(value.c_str(), &stop);
    CPDIT_CHECK(!value.empty() && stop == value.c_str() + value.size() && std::isfinite(s), invalid_argument,
                "--sigmas \"", text, "\": \"", value, "\" (value ", sigmas.size() + 1,
                ") is not a number; give σ values like 1.0,0.75,0.5,0.25");
    sigmas.push_back(s);
  }
  CPDIT_CHECK(!sigmas.empty() && text.back() != ',', invalid_argument, "--sigmas \"", text,
              "\" holds no values; give σ values like 1.0,0.75,0.5,0.25");
  return sigmas;
}

namespace {

// DPM++ 2M on a family's static or dynamic flow shift.
std::unique_ptr<Scheduler> dpm_solver(int64_t train_steps, double shift, std::optional<double> flow_shift,
                                      const FlowMatchEulerConfig* dynamic) {
  DPMSolverConfig c;
  c.num_train_timesteps = train_steps;
  c.flow_shift = flow_shift.value_or(shift);
  if (dynamic && dynamic->use_dynamic_shifting && !flow_shift) {
    CPDIT_CHECK(dynamic->time_shift_type == FlowMatchEulerConfig::TimeShift::exponential, unsupported,
                "dpm++2m shifts dynamically only by exp(mu) (time_shift_type \"exponential\"); give --flow-shift");
    c.use_dynamic_shifting = true;
    c.base_shift = dynamic->base_shift;
    c.max_shift = dynamic->max_shift;
    c.base_image_seq_len = dynamic->base_image_seq_len;
    c.max_image_seq_len = dynamic->max_image_seq_len;
  }
  return std::make_unique<DPMSolverMultistepScheduler>(c);
}

}  // namespace

std::unique_ptr<Scheduler> make_scheduler(const SchedulerChoice& choice, const FlowMatchEulerConfig& family) {
  const std::string& name = choice.name.empty() ? std::string("euler") : choice.name;
  if (name == "dpm++2m") return dpm_solver(family.num_train_timesteps, family.shift, choice.flow_shift, &family);
  CPDIT_CHECK(name == "euler" || name == "euler_a", invalid_argument, "--scheduler ", name,
              " is not a flow-match Euler schedule's (euler, euler_a, dpm++2m)");
  FlowMatchEulerConfig c = family;
  if (choice.flow_shift) {
    c.shift = *choice.flow_shift;
    c.use_dynamic_shifting = false;
  }
  c.sigmas = choice.sigmas;
  c.stochastic_sampling = c.stochastic_sampling || name == "euler_a";
  return std::make_unique<FlowMatchEulerScheduler>(c);
}

std::unique_ptr<Scheduler> make_scheduler(const SchedulerChoice& choice, const UniPCConfig& family) {
  const std::string& name = choice.name.empty() ? std::string("unipc") : choice.name;
  if (name == "dpm++2m") return dpm_solver(family.num_train_timesteps, family.flow_shift, choice.flow_shift, nullptr);
  CPDIT_CHECK(name == "unipc", invalid_argument, "--scheduler ", name, " is not a UniPC schedule's (unipc, dpm++2m)");
  UniPCConfig c = family;
  if (choice.flow_shift) c.flow_shift = *choice.flow_shift;
  c.sigmas = choice.sigmas;
  return std::make_unique<UniPCMultistepScheduler>(c);
}

}  // namespace cpdit::pipeline
