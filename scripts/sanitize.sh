#!/usr/bin/env bash
# Builds the unit tests under AddressSanitizer + UndefinedBehaviorSanitizer, and the in-process
# communicator suite under ThreadSanitizer, and runs them. MPI is left out of these builds (Open MPI
# itself is not sanitizer-clean); -O1 and the library's unity batches keep them short on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs=$(nproc)

cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS=-O1 -DCPDIT_SANITIZE=address,undefined -DCPDIT_MPI=OFF -DCPDIT_UNITY=ON >/dev/null
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -L unit --timeout 1800 -j"$jobs"

cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS=-O1 -DCPDIT_SANITIZE=thread -DCPDIT_MPI=OFF -DCPDIT_UNITY=ON >/dev/null
cmake --build build-tsan -j"$jobs" --target test_comm
TSAN_OPTIONS=halt_on_error=1 build-tsan/bin/test_comm
