#!/usr/bin/env bash
# Set-up + all tests: installs missing Debian packages, builds the release preset, runs ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release
scripts/check_deps.py build/release  # every package configure used comes from install-deps.sh (or the image)
cmake --build --preset release -j "$(nproc)"
ctest --preset release -j "$(nproc)"
