#!/usr/bin/env bash
# The README's Python way in, as a user runs it: a fresh virtual environment that sees Debian's packages,
# `pip install --no-build-isolation --no-index .` (offline: nothing downloaded), then, from outside the checkout,
# `lnorm --help`, `import lnorm` from the venv, and pytest on the examples and the Python tests with the plugin
# registered by the install (docs/python.md "Install"). The build goes to build/pip as a user's does: on CI's clean
# clone, from nothing (about two minutes on 2 cores; the release tree's test binaries are not built).
# `--reuse` builds from build/release instead (a developer's quick rerun; its cache is left as it is). Each step's
# time is printed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
scripts/install-deps.sh
if [ "${1:-}" = "--reuse" ]; then
  export LNORM_BUILD_DIR="$root/build/release"
else
  export LNORM_BUILD_DIR="${LNORM_BUILD_DIR:-$root/build/pip}"
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
timed() {
  local start=$SECONDS
  "$@"
  echo "test-pip: $* took $((SECONDS - start)) s"
}
timed /usr/bin/python3 -m venv --system-site-packages "$scratch/venv"
timed "$scratch/venv/bin/pip" install --quiet --no-build-isolation --no-index "$root"
cd "$scratch"  # away from the checkout: what is imported comes from the venv
"$scratch/venv/bin/lnorm" --help | head -3
"$scratch/venv/bin/python" -c "import lnorm, sys; assert lnorm.__file__.startswith(sys.prefix), lnorm.__file__; print('lnorm from', lnorm.__file__)"
"$scratch/venv/bin/python" -m pytest --version
# The plugin is registered by the install (entry point pytest11): no -p, no PYTHONPATH.
unset PYTHONPATH
export PYTHONDONTWRITEBYTECODE=1
timed "$scratch/venv/bin/python" -m pytest -q -p no:cacheprovider "$root/examples/python" "$root/python/tests"
