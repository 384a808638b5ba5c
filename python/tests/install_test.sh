#!/bin/sh
# `cmake --install` of the python component into a scratch prefix, then `import lnorm` from there, away
# from the source and build trees: the README's install instructions, run.
# Usage: install_test.sh BUILD_DIR PYTHON INSTALL_DIR CMAKE (INSTALL_DIR: LNORM_PYTHON_INSTALL_DIR, under the prefix)
set -eu
prefix="$1/python-install-test"
rm -rf "$prefix"
"$4" --install "$1" --prefix "$prefix" --component python >/dev/null
cd /
PYTHONPATH="$prefix/$3" "$2" -c "
import lnorm
assert lnorm.__file__.startswith('$prefix/'), lnorm.__file__
names = [k.name for k in lnorm.kernels()]
assert 'welford' in names, names
print('imported', lnorm.__file__, names)
"
