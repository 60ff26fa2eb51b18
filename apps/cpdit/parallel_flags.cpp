#include "parallel_flags.hpp"
#include "option_checks.hpp"


namespace cpdit::app {

void add_parallel_flags(CLI::App& cmd, ParallelFlags& flags) {
  cmd.add_option("--ring", flags.ring, "ring degree R (default: chosen for the rank count)")
      ->check(whole_number<int>())->group("Context parallelism");
  cmd.add_option("--ulysses", flags.ulysses, "Ulysses degree U (default: chosen for the rank count)")
      ->check(whole_number<int>())->group("Context parallelism");
  cmd.add_option("--rotate", flags.rotate,
                 "how the ring moves K and V: p2p (own + one block in flight) or allgather (default: p2p)")
      ->check(CLI::IsMember({"p2p", "allgather"}))->group("Context parallelism");
  cmd.add_option("--backend", flags.backend,
                 "attention backend: flash or native (default: $CPDIT_ATTENTION_BACKEND, else flash)")
      ->group("Context parallelism");
  cmd.add_option("--ranks", flags.ranks,
                 "local ranks (threads of this process); under mpirun the launched processes are the ranks "
                 "(default: cfg-parallel x ring x ulysses when given, else one per core)")
      ->check(whole_number<int>())
      ->group("Context parallelism");
  cmd.add_option("--threads", flags.threads, "compute threads per rank (default: cores / ranks)")
      ->check(whole_number<int>())->group("Context parallelism");
}

void add_cfg_flag(CLI::App& cmd, ParallelFlags& flags) {
  cmd.add_option("--cfg-parallel", flags.cfg,
                 "CFG-parallel: 2 runs the conditional and unconditional passes of classifier-free guidance on two "
                 "rank groups (each ring x ulysses) at once (default 1: one after the other)")
      ->check(CLI::IsMember({1, 2}))->group("Context parallelism");
}

}  // namespace cpdit::app
