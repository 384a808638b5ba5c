#!/usr/bin/python3
"""Guard: every Debian package that configure and the tests used must come from scripts/install-deps.sh.

A package installed by hand stays on the machine CI runs on, so a green CI can hide a missing
install-deps line (it happened: oneDNN's config needs OpenCL's development files, and only a hand
install had put them there). This guard maps what the build actually used to Debian packages and
requires each to be installed by install-deps.sh, a dependency of one it installs, or part of the
base image (scripts/base-image-packages.txt):

  - every path in each given build's CMakeCache.txt (FILEPATH/PATH entries and *_DIR, *_LIBRARY,
    *_INCLUDE_DIR, *_EXECUTABLE, *_COMPILER values): found libraries, headers, config files, tools;
  - every Python module the tests and scripts import (PYTHON_MODULES below) through /usr/bin/python3.

A path is satisfied when at least one package that owns it (dpkg -S; shared directories have many)
is allowed. Paths inside the source or build tree are the project's own; paths owned by no package
must sit under a prefix the image provides without dpkg (IMAGE_PREFIXES), or they fail: something
put them there by hand. Dependencies are read from dpkg's database (Depends, Pre-Depends, Provides)
so the guard works offline. Exit 0 when all is accounted for, 1 with one line per missing package.

Usage: scripts/check_deps.py [-v] [BUILD_DIR ...]   (default: every build/*/CMakeCache.txt; -v lists
each package and why it is allowed)
"""
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Python modules used by tests and scripts: reports/render.py (matplotlib, numpy), tests/test_report.py
# (jsonschema), python/tests and examples/python (pytest, hypothesis, torch).
PYTHON_MODULES = ["numpy", "matplotlib", "jsonschema", "pytest", "hypothesis", "torch"]
# The CUDA toolkit comes with the image, outside dpkg (/usr/local/cuda -> /usr/local/cuda-13.0).
IMAGE_PREFIXES = ["/usr/local/cuda"]
# The image also puts a two-line wrapper on PATH, /usr/local/bin/nvcc = `#!/bin/sh` + `exec
# /usr/local/cuda-13.0/bin/nvcc "$@"`; CI's PATH finds it first (stop 19 failed on exactly that). A
# wrapper counts as the image's when it is a short script whose exec target lies under IMAGE_PREFIXES.
WRAPPER_MAX_BYTES = 4096  # the image's is 50 bytes; a real program is far larger
WRAPPER_EXEC = re.compile(r"\bexec\s+(\S+)")
PATH_KEY = re.compile(r"(_DIR|_LIBRARY|_LIBRARIES|_INCLUDE_DIR|_INCLUDE_DIRS|_EXECUTABLE|_COMPILER|_PROGRAM)$")
# Outputs and settings, not things configure found.
SKIP_KEYS = {"CMAKE_INSTALL_PREFIX", "CMAKE_CACHEFILE_DIR", "CMAKE_HOME_DIRECTORY", "FETCHCONTENT_BASE_DIR"}


def under_image_prefix(path):
    real = os.path.realpath(path)
    return any(real.startswith(p) or path.startswith(p) for p in IMAGE_PREFIXES)


def image_wrapper_target(path):
    """The toolkit program a short exec-wrapper script runs, when it lies under IMAGE_PREFIXES; else None."""
    try:
        if os.path.getsize(path) > WRAPPER_MAX_BYTES:
            return None
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    if not text.startswith("#!"):
        return None
    targets = [t.strip("'\"") for t in WRAPPER_EXEC.findall(text)]
    if len(targets) == 1 and under_image_prefix(targets[0]) and os.path.exists(targets[0]):
        return targets[0]
    return None


def install_deps_packages():
    out = subprocess.run([os.path.join(ROOT, "scripts", "install-deps.sh"), "--list"],
                         check=True, capture_output=True, text=True).stdout
    return set(out.split())


def base_image_packages():
    with open(os.path.join(ROOT, "scripts", "base-image-packages.txt")) as f:
        return {line.strip() for line in f if line.strip() and not line.startswith("#")}


def dpkg_database():
    """Installed packages -> their dependency alternatives; virtual name -> installed providers."""
    fmt = "${Package}\t${Status}\t${Depends}, ${Pre-Depends}\t${Provides}\n"
    out = subprocess.run(["dpkg-query", "-W", "-f=" + fmt], check=True, capture_output=True, text=True).stdout
    depends, provides = {}, {}
    for line in out.splitlines():
        name, status, deps, prov = (line.split("\t") + ["", "", ""])[:4]
        if not status.endswith("installed") or " not-installed" in status:
            continue
        groups = []
        for group in deps.split(","):
            alts = [re.sub(r"[\s(:].*", "", a.strip()) for a in group.split("|")]
            alts = [a for a in alts if a]
            if alts:
                groups.append(alts)
        depends[name] = groups
        for p in prov.split(","):
            p = re.sub(r"[\s(:].*", "", p.strip())
            if p:
                provides.setdefault(p, set()).add(name)
    return depends, provides


def closure(roots, depends, provides):
    """roots and everything they depend on, as installed here (every installed alternative counts)."""
    seen, todo = set(), list(roots)
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        for alts in depends.get(p, []):
            for a in alts:
                for real in ({a} if a in depends else set()) | provides.get(a, set()):
                    if real not in seen:
                        todo.append(real)
    return seen


def owners_of(paths):
    """path -> packages owning it (or, failing that, its resolved target); one dpkg-query for all."""
    candidates = sorted({c for p in paths for c in (p, os.path.realpath(p))})
    r = subprocess.run(["dpkg-query", "-S"] + candidates, capture_output=True, text=True)
    owned = {}
    for line in r.stdout.splitlines():
        pkgs, _, path = line.rpartition(": ")
        path = path.strip().rstrip("/") or "/"
        if path in candidates or path + "/" in candidates:
            owned.setdefault(path, set()).update(p.strip().split(":")[0] for p in pkgs.split(","))
    return {p: sorted(owned.get(p.rstrip("/"), set()) or owned.get(os.path.realpath(p), set())) for p in paths}


def cache_paths(build_dir):
    """(key, path) for every absolute path configure recorded."""
    out = []
    with open(os.path.join(build_dir, "CMakeCache.txt"), errors="replace") as f:
        for line in f:
            m = re.match(r"^([A-Za-z0-9_.+-]+):(FILEPATH|PATH|STRING|UNINITIALIZED)=(.*)$", line.rstrip("\n"))
            if not m:
                continue
            key, kind, value = m.groups()
            if key in SKIP_KEYS or (kind in ("STRING", "UNINITIALIZED") and not PATH_KEY.search(key)):
                continue
            for v in value.split(";"):
                if v.startswith("/") and os.path.exists(v):
                    out.append((key, os.path.normpath(v)))
    return out


def python_module_paths():
    out, missing = [], []
    for m in PYTHON_MODULES:
        r = subprocess.run(["/usr/bin/python3", "-c", f"import {m}; print({m}.__file__)"], capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip():
            out.append((f"python module {m}", os.path.dirname(r.stdout.strip())))
        else:
            missing.append(m)
    return out, missing


def main(argv):
    verbose = "-v" in argv
    argv = [a for a in argv if a != "-v"]
    builds = argv[1:] or sorted(os.path.dirname(p) for p in glob.glob(os.path.join(ROOT, "build", "*", "CMakeCache.txt")))
    if not builds:
        print("check-deps: no configured build (run cmake --preset release first)")
        return 1
    deps_list = install_deps_packages()
    base = base_image_packages()
    depends, provides = dpkg_database()
    allowed_by_deps = closure(deps_list, depends, provides)
    inside = [os.path.realpath(ROOT)] + [os.path.realpath(b) for b in builds]

    uses = []  # (what, path)
    for b in builds:
        uses += [(f"{os.path.relpath(b, ROOT)}/CMakeCache.txt {k}", p) for k, p in cache_paths(b)]
    py_uses, py_missing = python_module_paths()
    uses += py_uses

    problems, accounted = [], {}
    uses = [(w, p) for w, p in uses
            if not any(os.path.realpath(p) == d or os.path.realpath(p).startswith(d + os.sep) for d in inside)]
    owner_map = owners_of([p for _, p in uses])
    rank = {"install-deps.sh": 0, "dependency of install-deps.sh": 1, "base image": 2}
    for what, path in uses:
        real = os.path.realpath(path)
        pkgs = owner_map[path]
        if not pkgs:
            if under_image_prefix(path):
                continue
            if image_wrapper_target(real):
                continue
            problems.append(f"{path} ({what}) belongs to no Debian package: installed by hand?")
            continue
        ok = [(p, "install-deps.sh" if p in deps_list else
               "dependency of install-deps.sh" if p in allowed_by_deps else "base image")
              for p in pkgs if p in allowed_by_deps or p in base]
        if ok:  # a shared directory has many owners: count the one closest to install-deps.sh
            p, why = min(ok, key=lambda o: rank[o[1]])
            accounted[p] = why
        else:
            problems.append(f"{' or '.join(pkgs)}: provides {path} ({what}), but install-deps.sh does not "
                            "install it, no package it installs depends on it, and the base image lacks it")
    for m in py_missing:
        problems.append(f"python module {m}: /usr/bin/python3 cannot import it (install-deps.sh should install it)")

    print(f"check-deps: {len(uses)} paths from {len(builds)} build(s) and {len(PYTHON_MODULES)} python modules "
          f"-> {len(accounted)} packages accounted for "
          f"({sum(v == 'install-deps.sh' for v in accounted.values())} installed by install-deps.sh, "
          f"{sum(v == 'dependency of install-deps.sh' for v in accounted.values())} their dependencies, "
          f"{sum(v == 'base image' for v in accounted.values())} from the base image)")
    if verbose:
        for p, why in sorted(accounted.items()):
            print(f"check-deps:   {p}: {why}")
    for p in sorted(set(problems)):
        print("check-deps: MISSING " + p)
    if problems:
        print("check-deps: FAIL: add the package(s) to scripts/install-deps.sh, with why")
        return 1
    print("check-deps: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
