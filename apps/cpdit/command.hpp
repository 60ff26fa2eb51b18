#pragma once
// Subcommands of the cpdit binary register themselves here from a static initialiser:
//
//   static const bool registered = cpdit::app::register_command("inspect", add_inspect);
//
// `add` creates the CLI11 subcommand on the given parent and sets its callback. Benchmarks
// register under the `bench` parent with register_bench.
#include <CLI/CLI.hpp>

#include <functional>
#include <string>

namespace cpdit::app {

using AddCommand = std::function<void(CLI::App& parent)>;

bool register_command(const std::string& name, AddCommand add);
bool register_bench(const std::string& name, AddCommand add);

// Builds the whole command tree (used by main and by tests of the command line).
void add_all_commands(CLI::App& root);

}  // namespace cpdit::app
