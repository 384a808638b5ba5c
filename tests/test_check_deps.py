#!/usr/bin/python3
"""scripts/check_deps.py, run on fake builds whose CMakeCache.txt names one tool each.

Stop 19's CI failed because CI's PATH found the image's /usr/local/bin/nvcc (a 2-line `exec
/usr/local/cuda-13.0/bin/nvcc` wrapper, owned by no package) where this machine's PATH found
/usr/local/cuda/bin/nvcc. These cases pin what the guard must accept and what it must still refuse.
Usage: test_check_deps.py SOURCE_DIR WORK_DIR
"""
import os
import shutil
import stat
import subprocess
import sys
import tempfile

src, work = sys.argv[1], sys.argv[2]
guard = os.path.join(src, "scripts", "check_deps.py")
nvcc = "/usr/local/cuda/bin/nvcc"
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
failures = []


# The tools live outside the source tree: the guard skips paths inside it and inside the builds it checks.
tools = tempfile.mkdtemp(prefix="lnorm_check_deps_")


def script(name, body):
    path = os.path.join(tools, name)
    with open(path, "w") as f:
        f.write(body)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


def guard_on(name, compiler, want_pass):
    build = os.path.join(work, "builds", name)
    os.makedirs(build)
    with open(os.path.join(build, "CMakeCache.txt"), "w") as f:
        f.write(f"CMAKE_CUDA_COMPILER:FILEPATH={compiler}\n")
    r = subprocess.run(["/usr/bin/python3", guard, build], capture_output=True, text=True)
    ok = (r.returncode == 0) == want_pass
    print(f"{'ok  ' if ok else 'FAIL'} {name}: rc {r.returncode}, want {'PASS' if want_pass else 'FAIL'}")
    if not ok:
        failures.append(name)
        print(r.stdout + r.stderr)
    elif not want_pass and "MISSING " + compiler not in r.stdout:
        failures.append(name + " (wrong reason)")
        print(r.stdout)


if not os.path.exists(nvcc):
    print(f"skip: {nvcc} absent (the CUDA toolkit comes with the image)")
    sys.exit(77)
guard_on("toolkit_itself", nvcc, True)
guard_on("image_wrapper", script("nvcc", f'#!/bin/sh\nexec {os.path.realpath(nvcc)} "$@"\n'), True)
guard_on("wrapper_quoted", script("nvcc_q", f'#!/bin/sh\nexec "{nvcc}" "$@"\n'), True)
# Still refused: a wrapper into something hand-installed, a script with two targets, a plain program.
guard_on("wrapper_elsewhere", script("nvcc_e", '#!/bin/sh\nexec /opt/cuda/bin/nvcc "$@"\n'), False)
guard_on("two_targets", script("nvcc_2", f'#!/bin/sh\n[ -n "$X" ] && exec /opt/x "$@"\nexec {nvcc} "$@"\n'), False)
guard_on("unowned_program", script("tool", "not a script, and owned by no package\n"), False)
shutil.rmtree(tools, ignore_errors=True)
sys.exit(1 if failures else 0)
