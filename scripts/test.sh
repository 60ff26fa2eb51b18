#!/usr/bin/env bash
# The whole test suite: installs, builds (Release) and runs every ctest entry, MPI ones included.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh -DCPDIT_UNITY=ON
ctest --test-dir build --output-on-failure --timeout 900 -j"$(nproc)"
