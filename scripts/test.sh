#!/usr/bin/env bash
# The whole test suite: installs, builds (Release) and runs every ctest entry, MPI ones included.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh -DCPDIT_UNITY=ON
ctest --test-dir build --output-on-failure --timeout 900 -j"$(nproc)"
# The Python package: `pip install .` into a venv made here (build/ holds the engine already, so only
# the native module compiles; see pyproject.toml), then its tests. Without build isolation
# scikit-build-core stays at one path, so it keeps build/'s CMake cache from one run to the next.
python3 -m venv build/pyvenv
build/pyvenv/bin/pip install -q pytest "scikit-build-core>=1.1"
build/pyvenv/bin/pip install -q --no-build-isolation .
build/pyvenv/bin/python -m pytest -q python/tests
