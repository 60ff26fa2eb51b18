#pragma once
// --dry-run on generate, encode-prompt and decode: the command checked as far as it can be without
// reading weights or computing — its flags, the files it reads (every missing one named at once, where
// a run stops at the first), its outputs' names and folders, and, when the model is there, the request
// against the model's family and config — then what it would do printed, and nothing run. A command
// that would fail says why in one line and exits 2, as the run would have.
#include "output_paths.hpp"

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace cpdit::app {

void add_dry_run_flag(CLI::App& cmd, bool& dry_run);

// One-line Error naming every input given (a non-empty path) that does not exist.
void refuse_missing(const std::vector<NamedPath>& inputs);

// The dry run's report on stdout: what the run would do, a line each, then that nothing ran.
void print_dry_run(const std::vector<std::string>& plan);

}  // namespace cpdit::app
