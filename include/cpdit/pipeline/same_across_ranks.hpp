#pragma once
// The checks that every MPI process of an mpirun launch runs the same command line on the same model
// files. Without them, ranks launched with different arguments (an MPMD launch, a per-rank --seed or
// --height) or whose model folders differ (one machine's copy edited or half downloaded) would run to
// the end and mix their results.
#include <cstdint>
#include <string>
#include <vector>

namespace cpdit::pipeline {

// Compares a digest of argv (without the program path) across the MPI processes before any work;
// a mismatch is the same one-line Error on every rank. Does nothing outside mpirun.
void check_same_arguments_across_ranks(int argc, const char* const* argv);

// Compares the model files under `paths` (--model, --config, ...; see model_digest.hpp) across the
// MPI processes; the first file that differs is named in the same one-line Error on every rank.
// Call it before any work; does nothing outside mpirun.
void check_same_model_across_ranks(const std::vector<std::string>& paths);

// A seed drawn from the system's entropy (for --seed -1): on the first MPI process, and the same on
// every process of the launch (a seed drawn per process would mix different noises into one picture).
uint64_t random_seed_across_ranks();

}  // namespace cpdit::pipeline
