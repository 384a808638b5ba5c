"""lnorm.case / lnorm.cases: the verify suite's input classes as arrays, drawn from a seed by the
same C++ generators `lnorm verify` uses (property_tests/src/cases.cpp)."""

import random
from dataclasses import dataclass
from typing import Optional

import numpy as np

from . import _lnorm


@dataclass(frozen=True, eq=False)
class Case:
    """One input: x (bf16 as uint16 bits), gamma/beta (None when absent), eps, axis, dtype, and a
    one-line description that reproduces it; a backward case (op "layernorm_bwd", "rmsnorm_bwd") has the
    upstream gradient dy too (x's shape and dtype; beta's presence asks for dbeta)."""

    x: np.ndarray
    gamma: Optional[np.ndarray]
    beta: Optional[np.ndarray]
    eps: float
    axis: int
    dtype: str
    description: str
    op: str = "layernorm"
    gamma_offset: float = 0.0
    dy: Optional[np.ndarray] = None

    def reference(self):
        """The exact answer for this case: (y, mean, rstd), or (y, rstd) for an RMSNorm case; for a backward
        case the exact (dx, dgamma, dbeta)."""
        from ._check import reference

        if self.op.endswith("_bwd"):
            from ._backward import reference_backward

            return reference_backward(self.x, self.dy, self.gamma, axis=self.axis, eps=self.eps, dtype=self.dtype,
                                      op=self.op[:-4], gamma_offset=self.gamma_offset)
        return reference(self.x, self.gamma, self.beta, axis=self.axis, eps=self.eps, dtype=self.dtype, op=self.op,
                         gamma_offset=self.gamma_offset)

    def __repr__(self):
        return f"Case({self.description})"


def case(row_classes=("normal",), *, dtype="f32", shape=(4, 17), axis=-1, eps=1e-5, gamma="absent", beta="absent",
         kappa=1e4, seed=0, op="layernorm"):
    """One case. row_classes: one name or several (row r gets row_classes[r % len]); see
    lnorm.ROW_CLASSES. gamma/beta: 'absent', 'identity', 'random' or 'with_zeros'. kappa: the
    condition number |mean|/std of offset rows (capped where the format still resolves the row). op:
    what the rows are for (RMSNorm's tiny rows sit at 0, so mean(x^2) << eps)."""
    if isinstance(row_classes, str):
        row_classes = (row_classes,)
    if not kappa > 0:
        raise ValueError("kappa must be > 0")
    d = _lnorm._case(dtype, list(row_classes), [int(s) for s in shape], int(axis), float(eps), gamma, beta,
                     float(np.log10(kappa)), int(seed) & (2**64 - 1), op)
    return Case(**d)


def cases(dtype="f32", *, classes=None, widths=None, max_width=4097, rows=3, eps=None, seed=1, op="layernorm"):
    """The suite's hard inputs: every row class in `classes` (default all of lnorm.ROW_CLASSES:
    offset, constant, tiny, huge, subnormal, sparse, exact_stats, nonfinite, ...) at every width in
    `widths` (default the suite's edge widths 1, 2, 3, 7, 8, 9, 15, 16, 17, ... up to max_width: SIMD
    widths +-1 and odd ones), with eps cycling through the edges (0, 1e-12, 1e-6, 1e-5, 1e-3, 1) unless
    `eps` is given, gamma/beta cycling through absent/random/with_zeros, offset kappas 10^1..10^7.
    The same seed gives the same arrays. Nonfinite rows have NaN answers; constant rows with eps = 0
    too (rstd = +inf). op="rmsnorm": the rows as RMSNorm's suite draws them, no beta."""
    classes = tuple(classes) if classes is not None else _lnorm.ROW_CLASSES
    widths = tuple(widths) if widths is not None else tuple(w for w in _lnorm.EDGE_WIDTHS if w <= max_width)
    eps_values = (eps,) if eps is not None else _lnorm.EDGE_EPS
    affine = ("absent", "random", "with_zeros")
    rng = random.Random(seed)
    out = []
    k = 0
    for c in classes:
        for w in widths:
            out.append(case(c, dtype=dtype, shape=(rows, w), eps=eps_values[k % len(eps_values)],
                            gamma=affine[k % 3], beta=affine[(k // 3) % 3] if op == "layernorm" else "absent",
                            kappa=10.0 ** (1 + k % 7), seed=rng.getrandbits(64), op=op))
            k += 1
    return out
