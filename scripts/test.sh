#!/usr/bin/env bash
# The whole test suite: installs, builds (Release) and runs every ctest entry, MPI ones included.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh -DCPDIT_UNITY=ON
ctest --test-dir build --output-on-failure --timeout 900 -j"$(nproc)"
# The Python package: `pip install .` exactly as a user runs it (with build isolation), into a venv
# made here, then its tests. build/ holds the engine already and keeps its options across pip's
# configure (python/build_options.cmake), so only the native module compiles.
python3 -m venv build/pyvenv
build/pyvenv/bin/pip install -q pytest tqdm openai schemathesis  # tqdm: the progress bar's; openai, schemathesis: serve's
build/pyvenv/bin/pip install -q .
build/pyvenv/bin/python -m pytest -q python/tests
