"""One gate: a measurement (lnorm.check, check_backward, check with quant=) turned into a pass or an AssertionError
whose message is the CLI's verdict. Observers (the pytest plugin: lnorm.pytest_plugin) see every gate: they record
it for --lnorm-report and, on a failure, save its arrays and add the `lnorm check` command that reproduces it."""
import math

import numpy as np

from ._torch import to_numpy

# fn(gate) -> lines to append to a failure's message; the pytest plugin registers one for its session.
OBSERVERS = []

# Python's array arguments and the CLI flag each travels as (check's y is --q for a quantized output; quant_y is --y).
_ARRAY_FLAGS = {"x": "--x", "y": "--y", "gamma": "--gamma", "beta": "--beta", "residual": "--residual", "h": "--h",
                "mean": "--mean", "rstd": "--rstd", "dy": "--dy", "dx": "--dx", "dgamma": "--dgamma",
                "dbeta": "--dbeta", "scales": "--scales", "quant_y": "--y"}
# Keyword arguments with no CLI flag of their own name (threads: the machine's; the rest are spelled alike).
_NOT_FLAGS = {"threads"}


class Gate:
    """What one gate measured: kind ("layernorm", "rmsnorm", "add_layernorm", "add_rmsnorm", "backward",
    "quantized"), the result object, the arrays (NumPy, bf16 as uint16 bits) and the options, as lnorm.check's
    keywords. Observers read these; `files` and `reproduce` are filled by the observer that saved the arrays."""

    def __init__(self, kind, result, arrays, options):
        self.kind, self.result, self.arrays, self.options = kind, result, arrays, options
        self.files = {}
        self.reproduce = None

    @property
    def passed(self):
        return bool(self.result)

    def worst(self):
        """(number, unit, where): the gate's headline error, its unit and the element it is at."""
        r = self.result
        if self.kind == "quantized":
            return r.q["max_ulp"], "quanta", r.q.get("max_ulp_index")
        if self.kind == "backward":
            parts = [(getattr(r, g)["max_ulp"], g, getattr(r, g)["max_ulp_index"]) for g in ("dx", "dgamma", "dbeta")
                     if getattr(r, g) is not None]
            top = max(parts, key=lambda p: p[0]) if parts else (0.0, "dx", None)
            return top[0], f"scaled ulp ({top[1]})", top[2]
        return r.max_ulp, "scaled ulp", r.max_ulp_index

    def budget_text(self):
        r, o = self.result, self.options
        if self.kind == "quantized":
            b = r.q["budget"]
            return "0.5 quantum + x-dtype rounding" if b == "default" else f"{b:g} quanta"
        if self.kind == "backward":
            return f"{o.get('max_ulp', 8):g} + {o.get('max_ulp_per_kappa', 1):g}*kappa scaled ulp"
        b = r.budget
        return f"{b['a']:g} + {b['b']:g}*kappa scaled ulp" if "layernorm" in r.op else f"{b['a']:g} scaled ulp"

    def command(self, files):
        """`lnorm check ...` for these saved files and this gate's options."""
        args = ["lnorm", "check"]
        if self.kind == "backward":
            args += ["--dir", "bwd"]
        for name, path in files.items():
            flag = "--q" if (name == "y" and self.kind == "quantized") else _ARRAY_FLAGS[name]
            args += [flag, path]
        for key, value in self.options.items():
            if value is None or key in _NOT_FLAGS or key in _ARRAY_FLAGS:
                continue
            if isinstance(value, float) and math.isfinite(value):
                value = f"{value:.17g}"
            args += ["--" + key.replace("_", "-"), str(value)]
        return " ".join(args)


def as_arrays(named):
    """(arrays, implied dtype): torch tensors as NumPy (bf16 as uint16 bits, implying dtype "bf16"), None dropped."""
    out, implied = {}, None
    for name, a in named.items():
        if a is None:
            continue
        arr, bf16 = to_numpy(a, name)
        implied = implied or bf16
        out[name] = np.asarray(arr)
    return out, implied


def gate(kind, what, result, arrays, options):
    """Tells every observer, then raises AssertionError with `what` and the verdict when the result fails."""
    __tracebackhide__ = True
    saved, implied = as_arrays(arrays)
    opts = {k: v for k, v in options.items() if v is not None}
    if implied and "dtype" not in opts:
        opts["dtype"] = implied  # uint16 files hold bf16 bits: the CLI must be told
    g = Gate(kind, result, saved, opts)
    extra = []
    for observe in list(OBSERVERS):
        extra += observe(g) or []
    if not result:
        raise AssertionError("\n".join([f"{what} over budget", str(result)] + extra))
    return result
