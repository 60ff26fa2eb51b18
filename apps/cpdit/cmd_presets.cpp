// `cpdit presets`: the built-in models (seeded random weights, nothing to download), each with its
// pipeline, the size a run makes by default and what its transformer holds, so a user can pick one
// before running it. The parameters are counted from the model's shapes: listing allocates nothing.
#include "command.hpp"
#include "progress.hpp"

#include <cpdit/pipeline/family.hpp>
#include <cpdit/pipeline/presets.hpp>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>
#include <string>

namespace cpdit::app {
namespace {

nlohmann::json preset_entry(const std::string& name) {
  const pipeline::Family& family = pipeline::family_for_preset(name);
  const int64_t parameters = pipeline::preset_parameters(name);
  const pipeline::FamilyDefaults d = family.defaults().of_preset();
  nlohmann::json j = {{"name", name},
                      {"pipeline", family.pipeline_classes().front()},
                      {"height", d.height},
                      {"width", d.width},
                      {"steps", d.steps},
                      {"parameters", parameters},
                      {"weight_bytes_f32", 4 * parameters},
                      {"weight_bytes_bf16", 2 * parameters}};
  if (family.video()) j["frames"] = d.frames;
  return j;
}

void run_presets(bool json) {
  nlohmann::json list = nlohmann::json::array();
  for (const std::string& name : pipeline::preset_names()) list.push_back(preset_entry(name));
  if (json) {
    std::printf("%s\n", list.dump().c_str());
    return;
  }
  std::printf("%-14s %-36s %-16s %12s %12s %12s\n", "preset", "pipeline", "default size", "parameters",
              "f32 weights", "bf16 weights");
  for (const nlohmann::json& p : list) {
    std::string size = std::to_string(int(p["height"])) + "x" + std::to_string(int(p["width"]));
    if (p.contains("frames")) size += "x" + std::to_string(int(p["frames"])) + "f";
    const double millions = double(p["parameters"].get<int64_t>()) / 1e6;
    std::printf("%-14s %-36s %-16s %11.1fM %12s %12s\n", p["name"].get<std::string>().c_str(),
                p["pipeline"].get<std::string>().c_str(), size.c_str(), millions,
                format_bytes(p["weight_bytes_f32"].get<uint64_t>()).c_str(),
                format_bytes(p["weight_bytes_bf16"].get<uint64_t>()).c_str());
  }
  std::printf("run one: cpdit generate --preset NAME -p \"a prompt\" -o out.png (a video preset: -o out.mp4)\n");
}

void add_presets(CLI::App& parent) {
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = parent.add_subcommand(
      "presets", "List the built-in models (seeded random weights, no download): pipeline, default size, weights");
  cmd->add_flag("--json", *json, "print the list as one JSON array");
  cmd->callback([json] { run_presets(*json); });
}

const bool registered = register_command("presets", add_presets);

}  // namespace
}  // namespace cpdit::app
