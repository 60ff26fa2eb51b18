// cpdit: diffusion transformers with context parallelism. Errors become one line and exit code 2.
#include "command.hpp"

#include <cpdit/core/error.hpp>

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  CLI::App root{"cpdit " CPDIT_VERSION
                ": runs diffusion transformers with context parallelism (ring, Ulysses and unified "
                "attention) across local ranks or Open MPI processes."};
  root.set_version_flag("--version", "cpdit " CPDIT_VERSION);
  root.require_subcommand(1);
  cpdit::app::add_all_commands(root);
  try {
    root.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return root.exit(e);
  } catch (const CLI::RuntimeError& e) {  // a command's own exit code (cpdit diff --tolerance)
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    root.exit(e);
    return 2;
  } catch (const cpdit::Error& e) {
    std::fprintf(stderr, "cpdit: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cpdit: internal error: %s\n", e.what());
    return 3;
  }
  return 0;
}
