# The module under test is the one built in this tree: ctest sets PYTHONPATH=<build>/python.
import lnorm  # noqa: F401  (fails here, once, with a clear ImportError when PYTHONPATH is wrong)
