// cpdit: diffusion transformers with context parallelism. Errors become one line and exit code 2.
#include "command.hpp"
#include <cpdit/pipeline/same_across_ranks.hpp>

#include <cpdit/core/error.hpp>

#include <csignal>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>

namespace {

// CLI11 answers an unknown command with "A subcommand is required": name it and the choices.
std::string parse_error_text(const CLI::App& root, int argc, char** argv, const CLI::ParseError& e) {
  if (argc < 2 || argv[1][0] == '-') return e.what();
  std::string names;
  for (const CLI::App* command : root.get_subcommands([](const CLI::App*) { return true; })) {
    if (command->get_name() == argv[1]) return e.what();
    names += (names.empty() ? "" : ", ") + command->get_name();
  }
  return "unknown command '" + std::string(argv[1]) + "'; the commands are " + names;
}

}  // namespace

int main(int argc, char** argv) {
  // Past a file-size limit, write() then fails with EFBIG and the error names the file, instead of
  // the signal ending the process without a word.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App root{"cpdit " CPDIT_VERSION
                ": runs diffusion transformers with context parallelism (ring, Ulysses and unified "
                "attention) across local ranks or Open MPI processes."};
  root.set_version_flag("--version", "cpdit " CPDIT_VERSION);
  root.require_subcommand(1);
  cpdit::app::add_all_commands(root);
  try {
    cpdit::pipeline::check_same_arguments_across_ranks(argc, argv);
    root.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return root.exit(e);
  } catch (const CLI::RuntimeError& e) {  // a command's own exit code (cpdit diff --tolerance)
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {  // CLI11 would print two lines without the prefix
    std::fprintf(stderr, "cpdit: error: %s (see --help)\n", parse_error_text(root, argc, argv, e).c_str());
    return 2;
  } catch (const cpdit::Error& e) {
    std::fprintf(stderr, "cpdit: error: %s\n", e.what());
    return 2;
  } catch (const std::filesystem::filesystem_error& e) {  // the operating system refused, e.g. a link loop
    std::fprintf(stderr, "cpdit: error: cannot read %s: %s\n", e.path1().c_str(), e.code().message().c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cpdit: internal error: %s\n", e.what());
    return 3;
  }
  return 0;
}
