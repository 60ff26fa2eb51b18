#include <cpdit/comm/launch.hpp>
#include <cpdit/comm/mpi.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/core/threads.hpp>
#include <cpdit/parallel/rank_layout.hpp>

#include <algorithm>

namespace cpdit::parallel {

void check_local_ranks(int ranks) {
  // Each local rank is a thread that waits on the others at every attention call: far more of them
  // than cores only slows the run down, and thousands exhaust the process's threads.
  const int most = std::max(64, 8 * hardware_threads());
  CPDIT_CHECK(ranks <= most, invalid_argument, ranks,
              " local ranks are more threads than this machine can usefully run (at most ", most,
              " here); use fewer, or mpirun to spread the ranks over machines");
}

RankLayout resolve_layout(const RankRequest& flags, int64_t heads, int default_ranks) {
  RankLayout layout;
  layout.mpi = comm::launched_by_mpi();
  const int cfg = flags.cfg;
  CPDIT_CHECK(cfg == 1 || cfg == 2, invalid_argument, "--cfg-parallel ", cfg, " must be 1 or 2");
  const int degrees = cfg * std::max(flags.ring, 1) * std::max(flags.ulysses, 1);
  const bool degrees_given = flags.ring > 0 || flags.ulysses > 0 || cfg > 1;
  if (layout.mpi) {
    layout.ranks = comm::mpi_world()->size();
    CPDIT_CHECK(flags.ranks == 0 || flags.ranks == layout.ranks, invalid_argument, "--ranks ", flags.ranks,
                " contradicts the ", layout.ranks, " processes mpirun launched; drop --ranks under mpirun");
  } else {
    layout.ranks = flags.ranks > 0     ? flags.ranks
                   : degrees_given     ? degrees
                                       : std::max(default_ranks / cfg * cfg, cfg);
  }
  CPDIT_CHECK(layout.ranks % cfg == 0, invalid_argument, "--cfg-parallel ", cfg,
              " needs an even rank count (two equal groups), but ", layout.ranks, " ranks run");
  const int group = layout.ranks / cfg;  // the ranks of one CFG group, split ring x ulysses

  if (!layout.mpi) check_local_ranks(layout.ranks);

  int ring = flags.ring, ulysses = flags.ulysses;
  if (ring == 0 && ulysses == 0) {
    ulysses = 1;
    for (int u = group; u >= 1; --u)
      if (group % u == 0 && heads % u == 0) {
        ulysses = u;
        break;
      }
    ring = group / ulysses;
  } else if (ring == 0) {
    CPDIT_CHECK(group % ulysses == 0, invalid_argument, "--ulysses ", ulysses, " does not divide the ", group,
                " ranks of a group; give --ring too, or a rank count that --ulysses divides");
    ring = group / ulysses;
  } else if (ulysses == 0) {
    CPDIT_CHECK(group % ring == 0, invalid_argument, "--ring ", ring, " does not divide the ", group,
                " ranks of a group; give --ulysses too, or a rank count that --ring divides");
    ulysses = group / ring;
  }
  CPDIT_CHECK(cfg * ring * ulysses == layout.ranks, invalid_argument, "cfg ", cfg, " x ring ", ring, " x ulysses ",
              ulysses, " = ", cfg * ring * ulysses, " ranks, but ", layout.ranks,
              " ranks run; make cfg x ring x ulysses equal the rank count");

  layout.config.ring_degree = ring;
  layout.config.ulysses_degree = ulysses;
  layout.config.cfg_degree = cfg;
  layout.config.rotate_method = parse_rotate_method(flags.rotate);
  const int local_ranks = layout.mpi ? comm::ranks_on_this_machine() : layout.ranks;
  layout.threads_per_rank = flags.threads > 0 ? flags.threads : std::max(1, hardware_threads() / local_ranks);
  return layout;
}

std::string oversubscription_warning(const RankLayout& layout, int cores) {
  const int64_t threads = int64_t(layout.ranks) * layout.threads_per_rank;
  if (layout.mpi || threads <= cores) return "";
  const int fitting = std::max(1, cores / layout.threads_per_rank);
  return detail::concat(layout.ranks, " local ranks of ", layout.threads_per_rank,
                        layout.threads_per_rank == 1 ? " thread" : " threads", " need ", threads,
                        " cores and this machine has ", cores, ": ranks sharing cores run slower than --ranks ",
                        fitting, " would");
}

std::string describe(const RankLayout& layout) {
  const auto& c = layout.config;
  return std::to_string(layout.ranks) + (layout.mpi ? " MPI" : " local") + (layout.ranks == 1 ? " rank" : " ranks") +
         " (" + (c.cfg_degree > 1 ? "cfg " + std::to_string(c.cfg_degree) + " x " : "") + "ring " +
         std::to_string(c.ring_degree) + " x ulysses " + std::to_string(c.ulysses_degree) + ", " +
         rotate_method_name(c.rotate_method) + "), " + std::to_string(layout.threads_per_rank) +
         (layout.threads_per_rank == 1 ? " thread" : " threads") + " each";
}

}  // namespace cpdit::parallel
