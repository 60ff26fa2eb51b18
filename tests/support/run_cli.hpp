#pragma once
// Runs the cpdit binary of this build (CPDIT_BINARY) with a shell argument string, capturing the
// exit code, stdout and stderr. `env` is prepended to the command (e.g. "CPDIT_ATTENTION_BACKEND=native").
// It runs in `cwd`, else in a fresh folder, so an output written by default (generate's output.png)
// lands there and is removed with it; paths in `args` are therefore absolute.
#include "support/temp_dir.hpp"

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/wait.h>

namespace cpdit::testing {

struct CliResult {
  int code = -1;  // exit code; -1 when killed by a signal
  std::string out, err;
};

inline CliResult run_cli(const std::string& args, const std::string& env = "", const std::string& cwd = "") {
  TempDir dir("cli");
  const std::string out = dir.file("stdout"), err = dir.file("stderr");
  const int status =
      std::system(("cd '" + (cwd.empty() ? dir.path().string() : cwd) + "' && " + env + " '" + std::string(CPDIT_BINARY) + "' " + args + " > " + out + " 2> " + err).c_str());
  auto slurp = [](const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

}  // namespace cpdit::testing
