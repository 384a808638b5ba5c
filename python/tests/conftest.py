# The module under test is the one built in this tree: ctest sets PYTHONPATH=<build>/python.
import lnorm  # noqa: F401  (fails here, once, with a clear ImportError when PYTHONPATH is wrong)

# pytester: test_pytest_plugin.py runs pytest sessions with lnorm's plugin, in a subprocess.
pytest_plugins = ["pytester"]
