"""lnorm.verify: the properties of ``lnorm verify`` (LayerNorm's or RMSNorm's, forward or backward) with a
Python callable as the kernel."""

import inspect
import json
import re
from dataclasses import dataclass, field
from typing import Optional

from . import _lnorm
from ._cases import Case
from ._torch import is_torch_tensor, to_numpy

_DTYPES = ("f32", "f64", "f16", "bf16")


@dataclass
class Outcome:
    """One property x dtype: status is pass, FAIL, xfail (expected failure), XPASS, xpass?, MISTRUSTED."""

    kernel: str
    op: str
    dtype: str
    property: str
    status: str
    failed: bool
    cases: int
    seconds: float
    seed: int
    worst: dict
    classes: dict
    correctly_rounded: Optional[float]
    message: str
    counterexample: str     # the shrunk case, one line
    reproduce: str          # one Python line that reruns exactly this
    expected_reason: str
    case: Optional[Case] = None  # the shrunk case as arrays (failures and expected failures)


@dataclass
class VerifyResult:
    """Truthy when no property failed and some property ran (every one skipped is NOTHING VERIFIED: falsy, as
    ``lnorm verify`` exits 1). ``str()`` is the CLI's table."""

    outcomes: list
    table: str
    seconds: float
    budgets: str
    failures: list = field(default_factory=list)

    def __post_init__(self):
        self.failures = [o for o in self.outcomes if o.failed]

    def __bool__(self):
        return not self.failures and any(o.status != "skipped" for o in self.outcomes)

    def __str__(self):
        return self.table

    def outcome(self, prop, dtype="f32"):
        for o in self.outcomes:
            if o.property == prop and o.dtype == dtype:
                return o
        raise KeyError((prop, dtype))


_WANTED_BWD = ("fn(x, dy, gamma, beta, eps) with NumPy arrays (x and dy 2-d rows x cols, gamma/beta 1-d or None, eps a "
               "float) returning (dx, dgamma, dbeta), None for a gradient not asked for; a torch function: wrap its "
               "forward with lnorm.torch_kernel(fn, dir='bwd'), which takes the gradients through autograd")

_WANTED = ("fn(x, gamma, beta, eps) with NumPy arrays (x 2-d rows x cols, gamma/beta 1-d or None, eps a float) "
           "returning y (or (y, mean, rstd); (y, rstd) for op='rmsnorm'); a torch function: wrap it with "
           "lnorm.torch_kernel(fn) (it adapts torch.nn.functional.layer_norm itself)")


def _probe(kernel, op, bwd, takes_offset, takes_stats):
    """Calls the kernel once on a small f32 case before the suite: a TypeError there is a signature the
    suite cannot call (a torch function given NumPy arrays, the wrong argument count), said once with the
    signature wanted, instead of failing every property with the same error."""
    import numpy as np

    x = np.linspace(-1.5, 2.0, 16, dtype=np.float32).reshape(2, 8)
    g, b = np.ones(8, np.float32), np.zeros(8, np.float32)
    eps = float(np.float32(1e-5))
    kw = {"gamma_offset": 0.0} if takes_offset else {}
    if takes_stats:
        kw.update(mean=np.zeros(2, np.float32) if op == "layernorm" else None, rstd=np.ones(2, np.float32))
    try:
        if bwd:
            kernel(x, np.ones_like(x), g, b if op == "layernorm" else None, eps, **kw)
        else:
            kernel(x, g, b if op == "layernorm" else None, eps, **kw)
    except TypeError as e:
        raise TypeError(f"lnorm.verify: fn's first call raised TypeError: {e}; lnorm.verify calls "
                        f"{_WANTED_BWD if bwd else _WANTED}") from e
    except Exception:  # noqa: BLE001 - any other error is the kernel's, judged by the properties
        pass


def _takes(fn, *names, var_keyword=True):
    """Whether fn takes every keyword in names (or, with var_keyword, has **kwargs)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    return all(n in sig.parameters for n in names) or (var_keyword and any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values()))


def _toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(float(v))
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"budget: cannot write {type(v).__name__} {v!r}")


def _section(name, dtype, user, op="layernorm"):
    """[name.dtype] (RMSNorm: [rmsnorm.name.dtype]) from budgets.toml's default section with the user's
    keys on top. A table whose numbers the user changes needs the user's reason too (as in budgets.toml)."""
    if not isinstance(user, dict):
        raise TypeError(f"budget for {dtype}: expected a dict like a budgets.toml section")
    merged = _lnorm._builtin_budget("default", dtype, op)
    for key, value in user.items():
        if key == "expected_failures":
            if not isinstance(value, dict):
                raise TypeError("budget['expected_failures']: expected {property: reason}")
            merged[key] = dict(value)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            if "reason" not in value and any(k != "reason" for k in value):
                raise ValueError(f"budget['{key}']: give a 'reason' with the numbers (as budgets.toml does)")
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value  # unknown keys reach the strict parser, which names them
    level = "" if op == "layernorm" else op + "."
    lines = [f"[{level}{name}.{dtype}]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in merged.items() if k != "expected_failures"]
    if merged.get("expected_failures"):
        lines.append(f"[{level}{name}.{dtype}.expected_failures]")
        lines += [f"{p} = {_toml_value(why) if isinstance(why, dict) else json.dumps(str(why))}"
                  for p, why in merged["expected_failures"].items()]
    return "\n".join(lines)


def _budget_toml(budget, name, dtypes, op="layernorm"):
    if budget is None or isinstance(budget, str):
        return budget
    if not isinstance(budget, dict):
        raise TypeError("budget: None, budgets.toml text, or a dict like a budgets.toml section")
    per_dtype = budget if budget and all(k in _DTYPES for k in budget) else {d: budget for d in dtypes}
    return "\n\n".join(_section(name, d, sec, op) for d, sec in per_dtype.items()) + "\n"


def _as_kernel(fn):
    """fn, with torch tensors it returns turned into arrays (bf16 as uint16 bits)."""

    def convert(out):
        if isinstance(out, (tuple, list)):
            return tuple(to_numpy(o, "fn's output")[0] if is_torch_tensor(o) else o for o in out)
        return to_numpy(out, "fn's output")[0] if is_torch_tensor(out) else out

    def kernel(*args, **kw):
        return convert(fn(*args, **kw))

    return kernel


def verify(fn, *, op="layernorm", dir="fwd", dtypes=("f32",), properties=None, cases=None, quick=True, seed=1,
           budget=None, name=None, f32_params=False):
    """Runs the properties of ``lnorm verify`` for op ("layernorm" or "rmsnorm") on fn(x, gamma, beta, eps)
    -> y, or (y, mean, rstd) for LayerNorm, (y, rstd) for RMSNorm; with dir="bwd", those of ``lnorm verify
    --dir bwd`` on fn(x, dy, gamma, beta, eps) -> (dx, dgamma, dbeta).

    fn gets 2-d C-contiguous arrays (rows x cols; bf16 as uint16 bits), gamma/beta 1-d or None, eps
    as a Python float already rounded to the kernel's format (f32, or f64 for f64 data), and returns
    y with x's shape and dtype (mean, rstd: one float32 per row, float64 for f64). When fn returns y
    only, the statistics are not judged (the harness fills in the exact ones).

    The params property (f32 gamma/beta beside 16-bit x, and the gamma offset C of y = ...(C + gamma)) is
    offered what fn takes: the offset when fn has a ``gamma_offset`` keyword, f32 gamma/beta with
    f32_params=True; it is skipped, with that reason, when fn takes neither.

    Backward (dir="bwd"): x and dy are 2-d (dy in x's dtype), gamma is None or 1-d, beta None or zeros of
    gamma's dtype (given when dbeta is asked for: its values enter no gradient). fn returns dx (x's shape
    and dtype) and dgamma/dbeta (cols values in gamma's dtype; None, or anything, for one not asked for).
    A fn with ``mean`` and ``rstd`` keyword parameters (named, not **kwargs) is given the forward's saved statistics (the exact ones
    rounded to float32, float64 for f64; mean None for RMSNorm), as a framework's backward gets them.
    Torch: ``lnorm.torch_kernel(forward, dir="bwd")`` takes a forward's gradients through autograd.

    properties: names from lnorm.PROPERTIES (LayerNorm) or lnorm.RMSNORM_PROPERTIES (backward:
    lnorm.BACKWARD_PROPERTIES, lnorm.RMSNORM_BACKWARD_PROPERTIES; default all of the op's). cases: per property (default 24 quick, 160 full). budget: None (budgets.toml's
    [default.<dtype>], or [rmsnorm.default.<dtype>]), a dict like a budgets.toml section — e.g.
    {"expected_failures": {"accuracy": "why"}}, or {"y": {"a": 16, "b": 1, "reason": "..."}}, or
    {"f32": {...}, "bf16": {...}} per dtype — or budgets.toml text with [<name>.<dtype>] sections. fn
    raising, or returning the wrong shape or dtype, fails the property it was called for (with its
    message) and the run goes on; a TypeError on the very first call (a signature the suite cannot call)
    is raised once instead. Returns a VerifyResult: truthy when nothing failed; str() is the table.
    """
    if dir not in ("fwd", "bwd"):
        raise ValueError(f"dir={dir!r}: expected 'fwd' or 'bwd'")
    bwd = dir == "bwd"
    if not callable(fn):
        raise TypeError("fn must be callable: " + (_WANTED_BWD if bwd else _WANTED))
    made_for = getattr(fn, "_lnorm_dir", None)
    if made_for is not None and made_for != dir:
        raise ValueError(f"fn was made by lnorm.torch_kernel(..., dir={made_for!r}); lnorm.verify was given dir={dir!r}")
    if op in ("add_layernorm", "add_rmsnorm"):  # a callable for Add & Norm would take the residual: not yet
        raise ValueError(f"op={op!r}: lnorm.verify takes 'layernorm' or 'rmsnorm' (Add & Norm: `lnorm verify --op {op}` "
                         "for a plugin, lnorm.check(..., residual=, h=) for outputs)")
    if op not in ("layernorm", "rmsnorm"):
        raise ValueError(f"op={op!r}: expected 'layernorm' or 'rmsnorm'" +
                         (" (the backward: dir='bwd')" if op.endswith("_bwd") else ""))
    full_op = op + "_bwd" if bwd else op
    if isinstance(dtypes, str):
        dtypes = (dtypes,)
    if isinstance(properties, str):
        properties = (properties,)
    if name is None:
        name = getattr(fn, "__name__", "fn")
    name = re.sub(r"[^A-Za-z0-9_-]", "_", str(name)).strip("_") or "fn"
    toml = _budget_toml(budget, name, tuple(dtypes), full_op)
    takes_offset = _takes(fn, "gamma_offset")
    # The statistics only to an fn that names them: a **kwargs wrapper forwarding to a backward without them
    # would fail on every call.
    takes_stats = bwd and _takes(fn, "mean", "rstd", var_keyword=False)
    kernel = _as_kernel(fn)
    _probe(kernel, op, bwd, takes_offset, takes_stats)
    r = _lnorm._verify(kernel, name, list(dtypes), list(properties or ()), int(cases or 0), bool(quick),
                       int(seed), toml, op=full_op, takes_offset=takes_offset, f32_params=bool(f32_params),
                       takes_stats=takes_stats)
    outcomes = []
    for o in r["outcomes"]:
        c = o.pop("case")
        outcomes.append(Outcome(**o, case=Case(**c) if c is not None else None))
    return VerifyResult(outcomes=outcomes, table=r["table"], seconds=r["seconds"], budgets=r["budgets"])
