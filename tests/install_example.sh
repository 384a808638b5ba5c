#!/bin/sh
# The installed package as a user meets it: `cmake --install` into a temporary prefix, then
# examples/plugin configured, built and tested against that prefix alone (find_package(lnorm)).
# Its ctest checks that demo:two_pass passes verify and that demo_buggy:two_pass fails eps_edges.
# Usage: install_example.sh BUILD_DIR SOURCE_DIR CXX_COMPILER CXX_FLAGS EXE_LINKER_FLAGS
# The example is built with the tree's compiler and flags: an asan tree installs an instrumented
# liblnorm_reference.a, which only links into instrumented code.
set -eu
build_dir=$1
source_dir=$2
cxx=${3:-c++}
cxx_flags=${4-}
exe_linker_flags=${5-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lnorm_install_example.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
cmake --install "$build_dir" --prefix "$tmp/prefix" >"$tmp/install.log"
test -x "$tmp/prefix/bin/lnorm"
test -f "$tmp/prefix/include/lnorm/plugin.h"
cmake -S "$source_dir/examples/plugin" -B "$tmp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CXX_FLAGS="$cxx_flags" \
  -DCMAKE_EXE_LINKER_FLAGS="$exe_linker_flags" -DCMAKE_MODULE_LINKER_FLAGS="$exe_linker_flags" >"$tmp/configure.log" || { cat "$tmp/configure.log"; exit 1; }
cmake --build "$tmp/build" >"$tmp/build.log" || { cat "$tmp/build.log"; exit 1; }
ctest --test-dir "$tmp/build" --output-on-failure
echo "install_example: installed package, plugin example built and gated"
