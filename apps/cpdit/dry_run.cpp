#include "dry_run.hpp"

#include <cpdit/core/error.hpp>

#include <cstdio>
#include <filesystem>

namespace cpdit::app {

void add_dry_run_flag(CLI::App& cmd, bool& dry_run) {
  cmd.add_flag("--dry-run", dry_run,
               "check the command without reading weights or computing (its flags, that the files it reads "
               "exist, its outputs, and the request against the model's config), print what it would do, run "
               "nothing");
}

void refuse_missing(const std::vector<NamedPath>& inputs) {
  std::string missing;
  int count = 0;
  for (const NamedPath& input : inputs) {
    std::error_code error;
    if (input.path.empty() || std::filesystem::exists(input.path, error)) continue;
    missing += (count++ ? ", " : "") + input.flag + " " + input.path;
  }
  CPDIT_CHECK(count == 0, invalid_argument, count == 1 ? "not found: " : "not found (" + std::to_string(count) + "): ",
              missing);
}

void print_dry_run(const std::vector<std::string>& plan) {
  for (const std::string& line : plan) std::printf("would %s\n", line.c_str());
  std::printf("dry run: the command checks out; nothing was run or written\n");
}

}  // namespace cpdit::app
