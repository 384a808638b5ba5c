"""Assertions for pytest, one per member of the norm family: each measures as `lnorm check` does and raises
AssertionError with the CLI's verdict (the worst element, its row's kappa, the budget) when over budget; under the
pytest plugin (lnorm.pytest_plugin) the message ends with the `lnorm check` command that reproduces it, and the gate
is recorded for --lnorm-report. Each returns the result object when it passes."""
import inspect

import numpy as np

from ._backward import check_backward
from ._check import check
from ._gate import as_arrays, gate

_CHECK_PARAMS = list(inspect.signature(check).parameters)
_BACKWARD_PARAMS = list(inspect.signature(check_backward).parameters)


def _split(params, args, kwargs):
    """check's arguments by name: arrays and options together, as the gate records them."""
    named = dict(zip(params, args))
    named.update(kwargs)
    return named


_ARRAY_NAMES = ("x", "y", "gamma", "beta", "residual", "h", "mean", "rstd", "scales", "quant_y", "dy", "dx", "dgamma",
                "dbeta")


def _gate(kind, what, result, named):
    __tracebackhide__ = True
    arrays = {k: v for k, v in named.items() if k in _ARRAY_NAMES}
    options = {k: v for k, v in named.items() if k not in _ARRAY_NAMES}
    return gate(kind, what, result, arrays, options)


def assert_layernorm_close(x, y, gamma=None, beta=None, **kwargs):
    """lnorm.check for pytest: raises AssertionError with the CLI's verdict when over budget; returns the
    CheckResult otherwise. Takes check's keyword arguments (op="rmsnorm", residual= too)."""
    __tracebackhide__ = True
    named = _split(_CHECK_PARAMS, (x, y, gamma, beta), kwargs)
    result = check(x, y, gamma, beta, **kwargs)
    what = {"rmsnorm": "RMSNorm", "layernorm": "LayerNorm", "add_layernorm": "Add & LayerNorm",
            "add_rmsnorm": "Add & RMSNorm"}.get(result.op, result.op)
    return _gate(result.op, f"{what} output", result, named)


def assert_rmsnorm_close(x, y, gamma=None, beta=None, **kwargs):
    """assert_layernorm_close for RMSNorm: check(..., op="rmsnorm") with RMSNorm's default budget of 8
    scaled ulps and no kappa term (nothing cancels in RMSNorm)."""
    __tracebackhide__ = True
    kwargs.setdefault("max_ulp_per_kappa", 0)
    return assert_layernorm_close(x, y, gamma, beta, op="rmsnorm", **kwargs)


def assert_add_norm_close(x, residual, y, gamma=None, beta=None, *, h=None, op="layernorm", **kwargs):
    """Add & Norm (vLLM's fused_add_rms_norm, a transformer block's residual + LayerNorm): y against the norm of
    the exact h = x + residual rounded once, and h itself (0.5 ulp by default) when given. op: "layernorm" or
    "rmsnorm" (RMSNorm's budget has no kappa term)."""
    __tracebackhide__ = True
    if op == "rmsnorm":
        kwargs.setdefault("max_ulp_per_kappa", 0)
    return assert_layernorm_close(x, y, gamma, beta, residual=residual, h=h, op=op, **kwargs)


def assert_backward_close(x, dy, gamma=None, *, dx=None, dgamma=None, dbeta=None, **kwargs):
    """lnorm.check_backward for pytest: the gradients given (any of dx, dgamma, dbeta) against the exact ones."""
    __tracebackhide__ = True
    named = _split(_BACKWARD_PARAMS, (x, dy, gamma), dict(kwargs, dx=dx, dgamma=dgamma, dbeta=dbeta))
    result = check_backward(x, dy, gamma, dx=dx, dgamma=dgamma, dbeta=dbeta, **kwargs)
    if dbeta is not None:  # `lnorm check --dir bwd --dbeta` needs a --beta (its values unread): zeros of dbeta's shape
        named["beta"] = np.zeros_like(as_arrays({"dbeta": dbeta})[0]["dbeta"])
    return _gate("backward", f"{result.op} backward", result, named)


def assert_quantized_close(x, q, gamma=None, beta=None, *, quant, scaling="tensor", **kwargs):
    """A quantized output q (and its scales=) for pytest, measured as `lnorm check --quant`: in quanta at y*/s
    with the candidate's own scales, the scales against the exact ones (and, with quant_y=, bit for bit against
    the quantizer's rule on the y it was handed)."""
    __tracebackhide__ = True
    named = _split(_CHECK_PARAMS, (x, q, gamma, beta), dict(kwargs, quant=quant, scaling=scaling))
    result = check(x, q, gamma, beta, quant=quant, scaling=scaling, **kwargs)
    return _gate("quantized", f"{quant}/{result.scaling} output", result, named)
