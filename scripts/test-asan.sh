#!/usr/bin/env bash
# CI, after scripts/test.sh: the unit tests, the CLI tests, the corpus replays and the quick verify suites,
# built with the asan preset (clang 14, AddressSanitizer + UBSan; the same build holds the libFuzzer targets
# scripts/fuzz.sh runs). Any sanitizer report fails the test that triggered it (-fno-sanitize-recover).
# Left to the release run (scripts/test.sh): `slow` and `nightly` (the full suites), `integration` (end-to-end
# runs of the report, the installed package and the package guard: scripts and compilers more than lnorm's
# memory) and the emulated kernels' executables (test_simd_emulation, test_cuda_emulation: the emulations are
# test code; the kernels they emulate run natively here in verify_quick).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset asan >/dev/null
start=$SECONDS
cmake --build --preset asan -j "$(nproc)" >/dev/null
echo "test-asan: build took $((SECONDS - start)) s"
ctest --preset asan -LE "slow|nightly|integration" -E "^test_(simd|cuda)_emulation:" -j "$(nproc)"
