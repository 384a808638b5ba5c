#!/usr/bin/env bash
# Installs exactly the Debian 12 packages lnorm's build and tests need. Idempotent: installs only
# what is missing, says what it does. As non-root it prints the one apt-get line to run instead.
set -euo pipefail

packages=(
  cmake ninja-build g++          # toolchain (CMake >= 3.25)
  libboost-dev                   # Boost.Multiprecision: the exact reference
  libcli11-dev                   # the lnorm command line
  nlohmann-json3-dev             # --json outputs
  catch2                         # unit tests (Catch2 v2.13 single header)
  librapidcheck-dev              # property-based generators and shrinking (property_tests/)
  libtomlplusplus-dev            # budgets.toml
  libbenchmark-dev               # bench/: Google Benchmark
  libdnnl-dev                    # bench/: oneDNN, the CPU baseline
  ocl-icd-opencl-dev             # oneDNN's dnnl-config.cmake runs find_package(OpenCL) REQUIRED: the
  opencl-c-headers               #   library (libOpenCL.so) and the CL/cl.h headers, or configure stops
  python3-matplotlib             # reports/render.py: the precision report's plots (brings numpy)
  python3-jsonschema             # tests/test_report.py: report.json against reports/report.schema.json
  clang-14 libclang-rt-14-dev    # fuzz/: the fuzz preset's compiler and libFuzzer (libclang_rt.fuzzer)
  pybind11-dev                   # python/: the `import lnorm` module's bindings (find_package(pybind11 CONFIG))
  python3-dev                    # python/: Python.h and the Development.Module component for /usr/bin/python3
  python3-numpy                  # python/: arrays in and out (FindPython3's NumPy component; numpy headers)
  python3-pytest                 # python/tests and examples/python: the pytest suites ctest runs
  python3-hypothesis             # lnorm.strategies: the Hypothesis strategy over the suite's input classes
  python3-torch                  # examples/python: gates torch.nn.functional.layer_norm (CPU)
  python3-venv python3-pip       # pip install (scripts/test-pip.sh): a venv with --system-site-packages, pip
  python3-setuptools python3-wheel  # pyproject.toml's build backend, used as installed (--no-build-isolation)
  ccache                         # .ci/run: the release and pip builds share their compiles (build/ccache)
)

# --list: the package names, one a line, for scripts/check_deps.py (the guard that fails when a
# package the build uses is not installed here).
if [ "${1:-}" = "--list" ]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

# .ci/run checks once and exports LNORM_DEPS_CHECKED=1: the scripts it runs then skip the check.
if [ "${LNORM_DEPS_CHECKED:-}" = 1 ]; then
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing ${missing[*]}; as root run:"
  echo "  apt-get update && $cmd"
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
