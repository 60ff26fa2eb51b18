#pragma once
// Under mpirun every process must run the same command: ranks launched with different arguments
// (an MPMD launch, a per-rank --seed or --height) would otherwise run to the end and mix results.
namespace cpdit::app {

// Compares a digest of argv (without the program path) across the MPI processes before any work;
// a mismatch is the same one-line Error on every rank. Does nothing outside mpirun.
void check_same_arguments_across_ranks(int argc, const char* const* argv);

}  // namespace cpdit::app
