#pragma once
// The check of a refused command line: exit code 2, one line on stderr naming what the user must fix,
// and nothing written at `never_written` (when given). Returns the run for further checks.
#include "support/run_cli.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

namespace cpdit::testing {

inline CliResult expect_cli_refused(const std::string& args, const std::string& message,
                                    const std::string& never_written = "") {
  CliResult r = run_cli(args);
  EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
  EXPECT_NE(r.err.find(message), std::string::npos) << args << "\n" << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\n" << r.err;
  if (!never_written.empty()) {
    EXPECT_FALSE(std::filesystem::exists(never_written)) << args;
  }
  return r;
}

}  // namespace cpdit::testing
