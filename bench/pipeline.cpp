// cpdit bench pipeline: N prompts as one `cpdit generate --prompts` process (one pipeline, its models
// loaded once) against N `cpdit generate --prompt` processes (each loading them again, as a user running
// the command N times does): wall and CPU seconds of both (the children's user + system time), min and
// median over the repeats, and their ratios, taken in the same run.
#include "command.hpp"
#include "measure.hpp"

#include <cpdit/core/error.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace cpdit::bench {
namespace {

namespace fs = std::filesystem;

struct PipelineBenchArgs {
  std::string preset = "flux-mini";
  int prompts = 4;
  int steps = 4;
  int64_t height = 256, width = 256;
  int ranks = 2;
  int repeats = 2;
};

double children_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_CHILDREN, &usage);
  auto seconds = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

struct Sample {
  double wall = 0, cpu = 0;
};

// Runs every command in turn; their wall and CPU seconds together.
Sample run_commands(const std::vector<std::string>& commands) {
  const double cpu = children_cpu_seconds();
  const auto start = std::chrono::steady_clock::now();
  for (const std::string& command : commands)
    CPDIT_CHECK(std::system(command.c_str()) == 0, internal, "bench pipeline: failed: ", command);
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
          children_cpu_seconds() - cpu};
}

std::pair<double, double> min_and_median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v.front(), v[v.size() / 2]};
}

void run(const PipelineBenchArgs& a) {
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  const fs::path dir = fs::temp_directory_path() / ("cpdit_bench_pipeline_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string common = self + " generate --preset " + a.preset + " --steps " + std::to_string(a.steps) +
                             " --height " + std::to_string(a.height) + " --width " + std::to_string(a.width) +
                             " --ranks " + std::to_string(a.ranks) + " --json";
  std::vector<std::string> separate;
  std::ofstream list(dir / "prompts.txt");
  for (int i = 0; i < a.prompts; ++i) {
    const std::string prompt = "prompt " + std::to_string(i) + " a red fox in the snow";
    list << prompt << "\n";
    separate.push_back(common + " --prompt '" + prompt + "' --image " + (dir / ("one.png")).string() + " > /dev/null 2>&1");
  }
  list.close();
  const std::vector<std::string> batch{common + " --prompts " + (dir / "prompts.txt").string() + " --image " +
                                       (dir / "batch.png").string() + " > /dev/null 2>&1"};
  std::vector<double> batch_wall, batch_cpu, separate_wall, separate_cpu;
  for (int r = 0; r < a.repeats; ++r) {  // interleaved, so a noisy moment falls on both
    const Sample b = run_commands(batch), s = run_commands(separate);
    batch_wall.push_back(b.wall);
    batch_cpu.push_back(b.cpu);
    separate_wall.push_back(s.wall);
    separate_cpu.push_back(s.cpu);
  }
  fs::remove_all(dir);
  nlohmann::json j = line("pipeline");
  j["preset"] = a.preset;
  j["prompts"] = a.prompts;
  j["steps"] = a.steps;
  j["height"] = a.height;
  j["width"] = a.width;
  j["ranks"] = a.ranks;
  j["repeats"] = a.repeats;
  const auto [bw_min, bw_median] = min_and_median(batch_wall);
  const auto [bc_min, bc_median] = min_and_median(batch_cpu);
  const auto [sw_min, sw_median] = min_and_median(separate_wall);
  const auto [sc_min, sc_median] = min_and_median(separate_cpu);
  j["batch_wall_min_s"] = bw_min;
  j["batch_wall_median_s"] = bw_median;
  j["batch_cpu_min_s"] = bc_min;
  j["batch_cpu_median_s"] = bc_median;
  j["separate_wall_min_s"] = sw_min;
  j["separate_wall_median_s"] = sw_median;
  j["separate_cpu_min_s"] = sc_min;
  j["separate_cpu_median_s"] = sc_median;
  // N prompts in one process as a share of N processes (1: nothing saved).
  j["batch_over_separate_wall"] = bw_min / sw_min;
  j["batch_over_separate_cpu"] = bc_min / sc_min;
  print(j);
}

void add_pipeline_bench(CLI::App& parent) {
  auto a = std::make_shared<PipelineBenchArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "pipeline", "N prompts in one generate --prompts process against N generate processes (each loading again)");
  cmd->add_option("--preset", a->preset, "the preset to run")->capture_default_str();
  cmd->add_option("--prompts", a->prompts, "prompts per batch")->capture_default_str();
  cmd->add_option("--steps", a->steps, "denoising steps per prompt")->capture_default_str();
  cmd->add_option("--height", a->height, "height in pixels")->capture_default_str();
  cmd->add_option("--width", a->width, "width in pixels")->capture_default_str();
  cmd->add_option("--ranks", a->ranks, "local ranks")->capture_default_str();
  cmd->add_option("--repeats", a->repeats, "timed repeats of both (no warm-up: each run is a fresh process)")
      ->capture_default_str();
  cmd->callback([a] { run(*a); });
}

const bool registered = app::register_bench("pipeline", add_pipeline_bench);

}  // namespace
}  // namespace cpdit::bench
