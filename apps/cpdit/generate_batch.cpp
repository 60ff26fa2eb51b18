#include "generate_batch.hpp"
#include "progress.hpp"
#include "request_fields.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <sstream>

namespace cpdit::app {
namespace {

namespace fs = std::filesystem;

// One .jsonl line's fields over `r`.
void apply_fields(const nlohmann::json& line, const std::string& where, pipeline::Request& r) {
  CPDIT_CHECK(line.is_object(), invalid_argument, where, ": each line must be a JSON object, got ", line.dump());
  for (const auto& [key, value] : line.items())
    CPDIT_CHECK(apply_request_field(key, value, where, r), invalid_argument, where, ": unknown field '", key,
                "' (fields: ", request_field_names(), ")");
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
