#!/usr/bin/env bash
# Set-up + all tests: installs missing Debian packages, builds the release preset, runs ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)"
ctest --preset release -j "$(nproc)"
