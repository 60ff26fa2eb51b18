#!/usr/bin/env bash
# Installs every Debian package cpdit needs to build, test and benchmark.
# Idempotent and quiet when everything is already present.
set -euo pipefail

packages=(
  build-essential cmake g++ git pkg-config
  libopenblas-dev libdnnl-dev libomp-dev
  libopenmpi-dev openmpi-bin
  nlohmann-json3-dev libcli11-dev libcpp-httplib-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  clang libclang-rt-14-dev
  libpng-dev libjpeg62-turbo-dev libwebp-dev
  libsentencepiece-dev libicu-dev
  libavcodec-dev libavformat-dev libswscale-dev
  python3-dev python3-venv pybind11-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
((${#missing[@]})) || exit 0

echo "setup: installing ${missing[*]}" >&2
sudo_cmd=()
[[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
