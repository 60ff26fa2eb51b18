#include "command.hpp"

#include <map>

namespace cpdit::app {

namespace {
// Function-local statics: registration runs during static initialisation of other files.
std::map<std::string, AddCommand>& commands() {
  static std::map<std::string, AddCommand> table;
  return table;
}
std::map<std::string, AddCommand>& benches() {
  static std::map<std::string, AddCommand> table;
  return table;
}
}  // namespace

bool register_command(const std::string& name, AddCommand add) {
  commands()[name] = std::move(add);
  return true;
}

bool register_bench(const std::string& name, AddCommand add) {
  benches()[name] = std::move(add);
  return true;
}

void add_all_commands(CLI::App& root) {
  for (auto& [name, add] : commands()) add(root);
  if (!benches().empty()) {
    CLI::App* bench = root.add_subcommand("bench", "Benchmarks; each prints one JSON object per line");
    bench->require_subcommand(1);
    for (auto& [name, add] : benches()) add(*bench);
  }
}

}  // namespace cpdit::app
