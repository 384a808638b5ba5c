#!/usr/bin/env bash
# The concurrency test (two kernels at once give the bits each gives alone) and the thread pool's test
# (parallel_rows: nested and concurrent callers, exceptions) under ThreadSanitizer (tsan preset; builds
# only test_concurrency, test_parallel and what they link).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset tsan >/dev/null
cmake --build --preset tsan -j "$(nproc)" >/dev/null
ctest --preset tsan
