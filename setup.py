"""The build behind pyproject.toml: CMake builds the extension `lnorm._lnorm` and the `lnorm` command with the
release preset's settings (no tests), and both go into the package; pip finds everything else in pyproject.toml.

Environment: LNORM_BUILD_DIR, the CMake build folder (default build/pip: a second install reuses it and rebuilds
only what changed); LNORM_CMAKE_ARGS, more -D settings; LNORM_JOBS, parallel jobs (default: every core)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def version():
    """CMakeLists.txt's project(lnorm VERSION x.y.z): one version for the C++ package and the wheel."""
    for line in (ROOT / "CMakeLists.txt").read_text().splitlines():
        if line.startswith("project(lnorm VERSION"):
            return line.split()[2]
    raise RuntimeError("setup.py: no 'project(lnorm VERSION ...)' line in CMakeLists.txt")


# What a fresh Debian 12 needs, named as apt-get names it: the message when one is missing.
TOOLS = {"cmake": "cmake", "ninja": "ninja-build", "g++": "g++"}


def missing_tools():
    return [pkg for tool, pkg in TOOLS.items() if shutil.which(tool) is None]


def check_python(cache):
    """Stops when the tree's extension is built for another Python version than the one installing it."""
    exe = next((ln.split("=", 1)[1] for ln in cache.read_text().splitlines() if ln.startswith("Python3_EXECUTABLE:")), None)
    if exe is None:
        return
    try:
        out = subprocess.run([exe, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True,
                             check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        sys.exit(f"lnorm: {cache.parent} was configured for {exe}, which does not run here; remove {cache} or set "
                 "LNORM_BUILD_DIR to another folder")
    if out != str(sys.version_info[:2]):
        sys.exit(f"lnorm: {cache.parent} builds the module for Python {out} ({exe}), not this {sys.version_info[:2]}; "
                 "set LNORM_BUILD_DIR to another folder")


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        missing = missing_tools()
        try:
            import numpy  # noqa: F401  (FindPython3's NumPy component needs it in this interpreter)
        except ImportError:
            missing.append("python3-numpy (in a venv: python3 -m venv --system-site-packages)")
        if missing:
            sys.exit("lnorm: cannot build: missing " + ", ".join(missing) +
                     ". Install them with: apt-get install " + " ".join(m.split()[0] for m in missing) +
                     " (or run scripts/install-deps.sh, which installs everything lnorm needs)")
        build_dir = Path(os.environ.get("LNORM_BUILD_DIR", ROOT / "build" / "pip")).resolve()
        build_dir.mkdir(parents=True, exist_ok=True)
        jobs = os.environ.get("LNORM_JOBS", str(os.cpu_count() or 2))
        cache = build_dir / "CMakeCache.txt"
        if cache.exists():
            # A configured tree (a second install, or LNORM_BUILD_DIR=build/release): built as it is configured, its
            # cache untouched (reconfiguring build/release for pip would drop its tests); its Python must be ours.
            check_python(cache)
        else:
            configure = ["cmake", "-S", str(ROOT), "-B", str(build_dir), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                         "-DCMAKE_UNITY_BUILD=ON", "-DLNORM_PYTHON=ON", "-DLNORM_BUILD_TESTS=OFF",
                         f"-DPython3_EXECUTABLE={sys.executable}"] + os.environ.get("LNORM_CMAKE_ARGS", "").split()
            self.run_step(configure, "configure")
        self.run_step(["cmake", "--build", str(build_dir), "--target", "_lnorm", "lnorm", "-j", jobs], "build")
        package = Path(self.get_ext_fullpath(ext.name)).parent
        package.mkdir(parents=True, exist_ok=True)
        built = list((build_dir / "python" / "lnorm").glob("_lnorm*.so"))
        if len(built) != 1:
            sys.exit(f"lnorm: expected one _lnorm*.so in {build_dir / 'python' / 'lnorm'}, found {built}")
        shutil.copy2(built[0], self.get_ext_fullpath(ext.name))
        (package / "bin").mkdir(exist_ok=True)
        shutil.copy2(build_dir / "cli" / "lnorm", package / "bin" / "lnorm")

    def run_step(self, cmd, what):
        print(f"lnorm: {what}: {' '.join(cmd)}", flush=True)
        if subprocess.call(cmd) != 0:
            sys.exit(f"lnorm: CMake {what} failed (above). A missing library names its Debian package in CMake's "
                     "message; scripts/install-deps.sh installs them all.")


# The CLI binary lands in the package's build folder beside the extension (lnorm/bin/lnorm), so the wheel holds it.
setup(version=version(), ext_modules=[Extension("lnorm._lnorm", sources=[])], cmdclass={"build_ext": CMakeBuild})
