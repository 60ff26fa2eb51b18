#include "generate_batch.hpp"
#include "progress.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <limits>

namespace cpdit::app {
namespace {

namespace fs = std::filesystem;

template <class T>
T whole(const nlohmann::json& value, const std::string& where, const char* field, double least) {
  CPDIT_CHECK(value.is_number_integer() && value.get<double>() >= least &&
                  value.get<double>() <= double(std::numeric_limits<T>::max()),
              invalid_argument, where, ": ", field, " must be a whole number >= ", least, ", got ", value.dump());
  return value.get<T>();
}

float finite(const nlohmann::json& value, const std::string& where, const char* field) {
  CPDIT_CHECK(value.is_number() && std::isfinite(value.get<double>()), invalid_argument, where, ": ", field,
              " must be a finite number, got ", value.dump());
  return value.get<float>();
}

std::string text(const nlohmann::json& value, const std::string& where, const char* field) {
  CPDIT_CHECK(value.is_string(), invalid_argument, where, ": ", field, " must be a string, got ", value.dump());
  return value.get<std::string>();
}

// One .jsonl line's fields over `r`.
void apply_fields(const nlohmann::json& line, const std::string& where, pipeline::Request& r) {
  CPDIT_CHECK(line.is_object(), invalid_argument, where, ": each line must be a JSON object, got ", line.dump());
  for (const auto& [key, value] : line.items()) {
    const char* k = key.c_str();
    if (key == "prompt") r.prompt = text(value, where, k);
    else if (key == "negative_prompt") r.negative_prompt = text(value, where, k);
    else if (key == "seed") r.seed = whole<uint64_t>(value, where, k, 0);
    else if (key == "steps") r.steps = whole<int>(value, where, k, 1);
    else if (key == "width") r.width = whole<int64_t>(value, where, k, 1);
    else if (key == "height") r.height = whole<int64_t>(value, where, k, 1);
    else if (key == "frames") r.frames = whole<int64_t>(value, where, k, 1);
    else if (key == "guidance") r.guidance = finite(value, where, k);
    else if (key == "true_cfg_scale") r.true_cfg_scale = finite(value, where, k);
    else if (key == "cfg_scale") r.cfg_scale = finite(value, where, k);
    else if (key == "scheduler") pipeline::check_scheduler_name(r.scheduler.name = text(value, where, k));
    else
      fail(ErrorKind::invalid_argument, where, ": unknown field '", key,
           "' (fields: prompt, negative_prompt, seed, steps, width, height, frames, guidance, true_cfg_scale, cfg_scale, "
           "scheduler)");
  }
  CPDIT_CHECK(r.prompt, invalid_argument, where, ": a line needs a prompt");
}

}  // namespace

std::string indexed_name(const std::string& name, size_t index) {
  if (name.empty()) return name;
  const std::string i = std::to_string(index);
  if (const size_t at = name.find("{index}"); at != std::string::npos)
    return name.substr(0, at) + i + name.substr(at + 7);
  const fs::path path(name);
  if (!path.has_filename()) return (path.parent_path().string() + "_" + i + "/");
  return (path.parent_path() / (path.stem().string() + "_" + i + path.extension().string())).string();
}

std::vector<BatchItem> read_batch(const std::string& path, const pipeline::Request& base, const Outputs& o) {
  CPDIT_CHECK(fs::is_regular_file(path), invalid_argument, "--prompts ", path, " is not a file");
  CPDIT_CHECK(o.any(), invalid_argument,
              "--prompts needs an output to write each request to: --image, --video, --frames-dir or --out "
              "(request i writes NAME_i, or NAME with {index} replaced)");
  const bool jsonl = fs::path(path).extension() == ".jsonl";
  std::istringstream in(io::read_text(path));
  std::vector<BatchItem> items;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + " line " + std::to_string(number);
    BatchItem item{base, {}};
    if (jsonl) {
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      CPDIT_CHECK(!j.is_discarded(), invalid_argument, where, ": not JSON");
      apply_fields(j, where, item.request);
    } else {
      if (line.back() == '\r') line.pop_back();
      item.request.prompt = line;
    }
    const size_t i = items.size();
    item.outputs = {indexed_name(o.out, i), indexed_name(o.preview, i), indexed_name(o.image, i),
                    indexed_name(o.frames_dir, i), indexed_name(o.video, i)};
    items.push_back(std::move(item));
  }
  CPDIT_CHECK(!items.empty(), invalid_argument, "--prompts ", path, " holds no prompt");
  return items;
}

void print_batch_line(int requests, const std::vector<pipeline::StageStats>& load, bool resident,
                      double load_seconds, double wall_seconds, bool json) {
  const double loaded = load.empty() ? 0.0 : load.front().seconds;
  if (json) {
    std::printf("%s\n", nlohmann::json{{"batch_requests", requests},
                                       {"resident", resident},
                                       {"load_seconds", loaded},
                                       {"open_seconds", load_seconds},
                                       {"wall_seconds", wall_seconds}}
                            .dump()
                            .c_str());
    return;
  }
  std::printf("batch        %d requests on one pipeline, %s, %s wall in all\n", requests,
              resident ? ("its models loaded once in " + format_duration(loaded)).c_str()
                       : "staged (each request loads its stages' models)",
              format_duration(wall_seconds).c_str());
}

}  // namespace cpdit::app
