#!/usr/bin/env bash
# The whole test suite: installs, builds (Release) and runs every ctest entry, MPI ones included.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh -DCPDIT_UNITY=ON
ctest --test-dir build --output-on-failure --timeout 900 -j"$(nproc)"
# The Python package: `pip install .` into a venv made here, then its tests. build/ holds the engine
# already, so only the native module compiles, as long as build/'s generator and compilers are kept:
# scikit-build-core would otherwise pick Ninja and Python's own CC/CXX, and CMake would start afresh.
python3 -m venv build/pyvenv
build/pyvenv/bin/pip install -q pytest
CMAKE_GENERATOR="Unix Makefiles" CC="${CC:-cc}" CXX="${CXX:-c++}" build/pyvenv/bin/pip install -q .
build/pyvenv/bin/python -m pytest -q python/tests
