"""The README's examples, run as written.

Usage: test_readme_examples.py LNORM_EXE SOURCE_DIR SCRATCH_DIR [PYTHONPATH_OF_THE_MODULE]

Every fenced block of README.md preceded by a marker line is run, in the README's order:

    <!-- test -->            the block must exit 0
    <!-- test: exit N -->    the block's last command must exit N (an example that shows a FAIL), and
                             every command before it must succeed

```sh blocks run with `bash -e -o pipefail`; ```python blocks with this interpreter (run it with Debian's
/usr/bin/python3, which has NumPy). Unmarked blocks (the quick start, set-up lines) are not run.

SCRATCH_DIR is emptied first. The blocks run one after another in SCRATCH_DIR/out/try, as the README's
set-up lines say (a scratch folder two levels below the checkout's root), so later blocks see the files
earlier ones wrote. For the README's relative paths to hold there, SCRATCH_DIR/kernels and
SCRATCH_DIR/examples link to SOURCE_DIR's; `lnorm` on PATH is LNORM_EXE. The plugin examples need g++. Python blocks get PYTHONPATH set to the folder holding the built `lnorm` package: the
fourth argument, or else <LNORM_EXE's folder>/../python (the build tree's layout); when neither holds the
package the Python blocks are skipped, and said so (pass the fourth argument to make them required).

Exit 0 when every block did what its marker says; 1 otherwise, printing each failing block, where it is
in the README, and its output; 2 on bad usage or a README whose markers are malformed.
"""

import os
import re
import shutil
import subprocess
import sys
import time

MARKER = re.compile(r"^<!--\s*test(?::\s*exit\s+(\d+))?\s*-->\s*$")
FENCE_OPEN = re.compile(r"^```(\w+)\s*$")
LANGUAGES = {"sh": "sh", "bash": "sh", "console": "sh", "python": "python", "py": "python"}
TIMEOUT_S = 300


def usage(message):
    print(f"test_readme_examples: {message}", file=sys.stderr)
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    sys.exit(2)


def blocks_of(readme_path):
    """(line number of the fence, language, expected exit, code) for every marked block."""
    with open(readme_path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    found = []
    i = 0
    while i < len(lines):
        m = MARKER.match(lines[i])
        if not m:
            i += 1
            continue
        expected = int(m.group(1) or 0)
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        fence = FENCE_OPEN.match(lines[j]) if j < len(lines) else None
        if not fence or fence.group(1) not in LANGUAGES:
            usage(f"{readme_path}:{i + 1}: a test marker must be followed by a ```sh or ```python block")
        k = j + 1
        while k < len(lines) and lines[k].strip() != "```":
            k += 1
        if k == len(lines):
            usage(f"{readme_path}:{j + 1}: the block is never closed")
        found.append((j + 1, LANGUAGES[fence.group(1)], expected, "\n".join(lines[j + 1:k]) + "\n"))
        i = k + 1
    return found


def main(argv):
    if len(argv) not in (4, 5):
        usage("expected 3 or 4 arguments")
    exe, source, scratch = (os.path.abspath(a) for a in argv[1:4])
    if not os.access(exe, os.X_OK):
        usage(f"{exe} is not an executable")
    readme = os.path.join(source, "README.md")
    if not os.path.isfile(readme):
        usage(f"{readme} does not exist")
    if len(argv) == 5:
        pythonpath = os.path.abspath(argv[4])
        if not os.path.isfile(os.path.join(pythonpath, "lnorm", "__init__.py")):
            usage(f"{pythonpath} holds no lnorm package (lnorm/__init__.py)")
    else:
        pythonpath = os.path.normpath(os.path.join(os.path.dirname(os.path.realpath(exe)), "..", "python"))
        if not os.path.isfile(os.path.join(pythonpath, "lnorm", "__init__.py")):
            pythonpath = None

    blocks = blocks_of(readme)
    if not blocks:
        usage(f"{readme} has no <!-- test --> blocks: the examples would go untested")

    # The layout the README's set-up lines make: SCRATCH/out/try, the checkout's sources two levels up.
    shutil.rmtree(scratch, ignore_errors=True)
    work = os.path.join(scratch, "out", "try")
    os.makedirs(work)
    for name in ("kernels", "examples"):
        os.symlink(os.path.join(source, name), os.path.join(scratch, name))
    bindir = os.path.join(scratch, "bin")
    os.makedirs(bindir)
    os.symlink(exe, os.path.join(bindir, "lnorm"))
    env = dict(os.environ)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"

    failures, ran, skipped = [], 0, 0
    start = time.monotonic()
    for n, (line, language, expected, shown) in enumerate(blocks, 1):
        code = shown
        script = os.path.join(scratch, f"block{n}.{'sh' if language == 'sh' else 'py'}")
        prefix_ok = os.path.join(scratch, f"block{n}.prefix-ok")
        if language == "sh" and expected != 0:
            # The non-zero exit must come from the last command, not from one before it (a compiler error
            # exits 1 too): the commands before it run under -e and then leave a mark.
            lines = code.rstrip().split("\n")
            s = len(lines) - 1
            while s > 0 and lines[s - 1].rstrip().endswith("\\"):
                s -= 1
            code = "\n".join(lines[:s] + [f": > '{prefix_ok}'"] + lines[s:]) + "\n"
        with open(script, "w", encoding="utf-8") as f:
            f.write(code)
        if language == "sh":
            command = ["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", script]
            block_env = env
        else:
            if pythonpath is None:
                print(f"SKIP  README.md:{line} (python): no built lnorm package beside {exe}; pass its folder as the 4th argument")
                skipped += 1
                continue
            command = [sys.executable, script]
            block_env = dict(env, PYTHONPATH=pythonpath + os.pathsep + env.get("PYTHONPATH", ""))
        t0 = time.monotonic()
        try:
            p = subprocess.run(command, cwd=work, env=block_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=TIMEOUT_S)
            status, output = p.returncode, p.stdout.decode("utf-8", "replace")
        except subprocess.TimeoutExpired as e:
            status, output = None, (e.stdout or b"").decode("utf-8", "replace") + f"\n(timed out after {TIMEOUT_S} s)"
        ran += 1
        ok = status == expected
        if ok and language == "sh" and expected != 0 and not os.path.exists(prefix_ok):
            ok = False
            output += "\n(a command before the last one failed: the expected exit status must come from the last)"
        print(f"{'ok  ' if ok else 'FAIL'}  README.md:{line} ({language}, exit {status}, expected {expected}, "
              f"{time.monotonic() - t0:.1f} s)")
        if not ok:
            failures.append((line, language, expected, status, shown, output))

    for line, language, expected, status, code, output in failures:
        print(f"\n==== README.md:{line}: the {language} block exited {status}, expected {expected}")
        print("---- block:")
        print(code.rstrip())
        print("---- its output (last 60 lines):")
        print("\n".join(output.rstrip().split("\n")[-60:]))
    print(f"\ntest_readme_examples: {ran} blocks run, {len(failures)} failed, {skipped} skipped "
          f"({time.monotonic() - start:.1f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
