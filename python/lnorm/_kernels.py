"""lnorm.kernels and lnorm.run: the built-in kernels of ``lnorm list`` / ``lnorm run``."""

from typing import NamedTuple

from . import _lnorm
from ._check import _arrays, _quant_args_need_quant
from ._quant import run_quant


class Kernel(NamedTuple):
    name: str
    summary: str
    dtypes: tuple       # dtypes it takes
    unavailable: dict   # dtype -> why it cannot run here (missing ISA, no CUDA device); empty: runs
    cautionary: bool    # wrong on purpose (onepass): its failures are the lesson
    ops: tuple          # "layernorm", "rmsnorm", "add_layernorm", "add_rmsnorm": the ops it implements


def kernels():
    """Every built-in kernel, in the registry's order (best first)."""
    return [Kernel(**k) for k in _lnorm.kernels()]


def run(name, x, gamma=None, beta=None, *, axis=-1, eps=1e-5, dtype=None, threads=1, op="layernorm", gamma_offset=0.0,
        residual=None, quant=None, scaling="tensor", scale=None, global_scale=None, mx_rule=None,
        scale_format=None, scale_layout=None):
    """Runs built-in kernel `name` on x: (y, mean, rstd), or (y, rstd) for op="rmsnorm", shaped like
    lnorm.reference's (which documents gamma/beta's dtypes, gamma_offset and residual: Add & Norm, h appended)."""
    _quant_args_need_quant(quant, scaling, scale, global_scale=global_scale, mx_rule=mx_rule,
                           scale_format=scale_format, scale_layout=scale_layout)
    dtype, a = _arrays(dtype, x=x, gamma=gamma, beta=beta, residual=residual)
    if quant is not None:  # the kernel's quantized output, (q, scales), as lnorm.reference(quant=...)
        return run_quant(name, a, dtype, quant=quant, scaling=scaling, scale=scale, axis=axis, eps=eps, threads=threads,
                         op=op, gamma_offset=gamma_offset, global_scale=global_scale, mx_rule=mx_rule,
                         scale_format=scale_format, scale_layout=scale_layout)
    return _lnorm.run(name, a["x"], a["gamma"], a["beta"], axis=axis, eps=eps, dtype=dtype, threads=threads, op=op,
                      gamma_offset=float(gamma_offset), residual=a["residual"])
