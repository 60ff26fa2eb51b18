#pragma once
// The context-parallel flags every command that runs a model or attention shares (--ring, --ulysses,
// --rotate, --backend, --ranks, --threads) into a parallel::RankRequest (parallel/rank_layout.hpp
// resolves it).
#include <CLI/CLI.hpp>
#include <cpdit/parallel/rank_layout.hpp>

#include <string>

namespace cpdit::app {

using ParallelFlags = parallel::RankRequest;
using parallel::RankLayout;
using parallel::check_local_ranks;
using parallel::describe;
using parallel::resolve_layout;

void add_parallel_flags(CLI::App& cmd, ParallelFlags& flags);
// --cfg-parallel, for commands whose pipelines run classifier-free guidance.
void add_cfg_flag(CLI::App& cmd, ParallelFlags& flags);

}  // namespace cpdit::app
