#!/usr/bin/env bash
# Set-up + the tests: installs missing Debian packages, builds the release preset, runs ctest's per-change tier
# (what CI runs); `scripts/test.sh --all` runs the nightly tier too (docs/ci.md "Tiers").
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release
scripts/check_deps.py build/release  # every package configure used comes from install-deps.sh (or the image)
start=$SECONDS
cmake --build --preset release -j "$(nproc)"
echo "test.sh: build took $((SECONDS - start)) s"
# The per-change tier (docs/ci.md "Tiers"): every test but the quick verify suites (draws of the full suites run
# here; the sanitizer build runs them) and the `nightly` label (scripts/test-nightly.sh). --all adds `nightly`.
# LNORM_CTEST_SKIP: a regex of test names to leave out (.ci/run: the pytest entries its pip step runs again).
skip=()
[ -n "${LNORM_CTEST_SKIP:-}" ] && skip=(-E "$LNORM_CTEST_SKIP")
if [ "${1:-}" = "--all" ]; then
  ctest --preset release -j "$(nproc)" -LE quick "${skip[@]}"
else
  ctest --preset release -j "$(nproc)" -LE "quick|nightly" "${skip[@]}"
fi
