#!/usr/bin/env bash
# Builds the libFuzzer target (clang) and fuzzes the safetensors reader for N seconds (default 60).
# Exits non-zero when the fuzzer finds a crash, leak or sanitizer error; the input that triggered it
# is saved in $BUILD/crashes/ — copy it to tests/data/fuzz_regressions/ once fixed.
#   fuzz/run.sh [seconds]        environment: CPDIT_FUZZ_BUILD (default build-fuzz), JOBS (default 2)
set -euo pipefail

seconds="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${CPDIT_FUZZ_BUILD:-$root/build-fuzz}"

CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DCPDIT_FUZZ=ON -DCPDIT_TESTS=OFF -DCPDIT_MPI=OFF >/dev/null
cmake --build "$build" --target fuzz_safetensors -j"${JOBS:-2}"

# New inputs go to a working corpus in the build folder; the committed seeds stay read-only.
mkdir -p "$build/fuzz-corpus" "$build/crashes"
"$build/bin/fuzz_safetensors" "$build/fuzz-corpus" "$root/fuzz/corpus" "$root/tests/data/fuzz_regressions" \
  -dict="$root/fuzz/safetensors.dict" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$build/crashes/" -print_final_stats=1
