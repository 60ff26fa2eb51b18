#include "cp_flags.hpp"
#include "option_checks.hpp"

#include "parallel_flags.hpp"

#include <cpdit/comm/launch.hpp>
#include <cpdit/comm/mpi.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/parallel/context.hpp>
#include <cpdit/parallel/shard.hpp>


namespace cpdit::app {

void add_cp_flags(CLI::App& cmd, CpFlags& flags) {
  const char* group = "Context parallelism";
  cmd.add_option("--ring", flags.ring, "ring degree R")->check(whole_number<int>())->group(group);
  cmd.add_option("--ulysses", flags.ulysses, "Ulysses degree U")->check(whole_number<int>())->group(group);
  cmd.add_option("--rotate", flags.rotate, "how the ring moves K and V: p2p (own + one block in flight) or allgather")
      ->check(CLI::IsMember({"p2p", "allgather"}))->group(group);
  cmd.add_option("--ranks", flags.ranks, "local ranks (threads); under mpirun the launched processes are the ranks")
      ->check(whole_number<int>())->group(group);
}

bool cp_requested(const CpFlags& flags) {
  return flags.ring > 0 || flags.ulysses > 0 || flags.ranks > 0 || comm::launched_by_mpi();
}

attention::Result run_context_parallel(const CpFlags& flags, const Tensor& q, const Tensor& k,
                                       const Tensor& v, const attention::Mask& mask,
                                       const attention::Backend& backend, int threads) {
  CPDIT_CHECK(q.dim() == 4 && k.dim() == 4, invalid_argument,
              "attention: q and k must be 4-D (B, S, H, D), got q ", q.describe(), " k ", k.describe());
  ParallelFlags layout_flags;
  layout_flags.ring = flags.ring;
  layout_flags.ulysses = flags.ulysses;
  layout_flags.rotate = flags.rotate;
  layout_flags.ranks = flags.ranks;
  layout_flags.threads = threads;
  const RankLayout layout = resolve_layout(layout_flags, q.size(2), 1);
  parallel::validate_call(layout.config, backend,
                          {q.size(2), k.size(2), mask.kind, q.dtype(), false, mask.rule});

  // Allocated here, not on a rank thread: a rank's memory counter ends with its run.
  attention::Result gathered{Tensor::empty(q.shape(), q.dtype()),
                             Tensor::empty({q.size(0), q.size(2), q.size(1)})};
  comm::LocalOptions options;
  options.threads_per_rank = layout.threads_per_rank;
  comm::run_ranks(layout.ranks, [&](comm::Communicator& comm) {
    parallel::ParallelContext context({&comm, [](comm::Communicator*) {}}, layout.config);
    comm::Communicator& flat = context.mesh().flat();
    attention::Options opts;
    opts.mask = mask;
    if (mask.kind != attention::MaskKind::none) opts.mask.tensor = parallel::shard(mask.tensor, 1, flat);
    const attention::Result mine = context.forward(backend, parallel::shard(q, 1, flat),
                                                   parallel::shard(k, 1, flat),
                                                   parallel::shard(v, 1, flat), opts);
    const Tensor out = parallel::gather(mine.out, 1, flat), lse = parallel::gather(mine.lse, 2, flat);
    if (flat.rank() != 0) return;
    gathered.out.copy_(out);
    gathered.lse.copy_(lse);
  }, options);
  if (layout.mpi && comm::mpi_world()->rank() != 0) return {};
  return gathered;
}

}  // namespace cpdit::app
