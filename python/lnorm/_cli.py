"""The `lnorm` command of a pip install (pyproject.toml's [project.scripts]): the CLI binary built beside the
extension, run with this process's arguments (exec: its exit code and signals are the command's own)."""
import os
import sys
from pathlib import Path


def binary():
    """The installed CLI: lnorm/bin/lnorm in this package (pip install), else None."""
    path = Path(__file__).resolve().parent / "bin" / "lnorm"
    return path if path.is_file() else None


def main():
    path = binary()
    if path is None:
        sys.exit("lnorm: this copy of the Python package has no CLI binary (a build tree or cmake --install: the "
                 "command is build/release/cli/lnorm or <prefix>/bin/lnorm)")
    os.execv(str(path), [str(path)] + sys.argv[1:])
