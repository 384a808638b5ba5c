#!/usr/bin/env bash
# CI, after scripts/test.sh: the unit tests, the CLI tests, the fuzz corpus replays and the quick
# property suite (everything but the `slow` label) built with AddressSanitizer + UBSan (asan preset).
# Any sanitizer report fails the test that triggered it (-fno-sanitize-recover).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$(nproc)" >/dev/null
ctest --preset asan -LE slow -j "$(nproc)"
