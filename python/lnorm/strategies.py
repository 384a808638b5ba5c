"""Hypothesis strategies over the verify suite's input classes, so a user's own property tests draw
the same hard inputs (offset rows up to kappa 1e7, constant, tiny-variance, huge, subnormal, sparse,
exact-statistics, NaN/Inf rows, edge widths and eps edges) and shrink them to small cases.

    from hypothesis import given
    from lnorm.strategies import layernorm_inputs

    @given(layernorm_inputs(dtype="f32", max_cols=300))
    def test_my_layernorm(case):
        y = my_layernorm(case.x, case.gamma, case.beta, case.eps)
        lnorm.assert_layernorm_close(case.x, y, case.gamma, case.beta, eps=case.eps)

    @given(rmsnorm_inputs(dtype="bf16", max_cols=300))
    def test_my_rmsnorm(case):
        y = my_rmsnorm(case.x, case.gamma, case.eps)
        lnorm.assert_rmsnorm_close(case.x, y, case.gamma, eps=case.eps, dtype=case.dtype)
"""

from hypothesis import strategies as st

from . import _lnorm
from ._cases import case as _case


def layernorm_inputs(dtype="f32", *, classes=None, max_rows=8, max_cols=256, eps=None, affine=True, op="layernorm",
                     beta=True):
    """Strategy of lnorm.Case. classes: row classes to draw (default all; drop "nonfinite" if your
    kernel's contract excludes NaN/Inf). Widths: the suite's edge widths up to max_cols, or any in
    1..max_cols. eps: fixed, or drawn from the suite's edges (0, 1e-12, 1e-6, 1e-5, 1e-3, 1).
    Shrinks towards fewer rows, narrower rows, the first class and no affine. op: what the rows are
    for (rmsnorm_inputs sets it); beta=False never draws a beta."""
    classes = tuple(classes) if classes is not None else _lnorm.ROW_CLASSES
    edges = [w for w in _lnorm.EDGE_WIDTHS if w <= max_cols]
    affine_kinds = _lnorm.AFFINE_KINDS if affine else ("absent",)

    @st.composite
    def draw_case(draw):
        row_classes = draw(st.lists(st.sampled_from(classes), min_size=1, max_size=3))
        rows = draw(st.integers(1, max_rows))
        cols = draw(st.one_of(st.sampled_from(edges), st.integers(1, max_cols)) if edges else st.integers(1, max_cols))
        e = eps if eps is not None else draw(st.sampled_from(_lnorm.EDGE_EPS))
        return _case(row_classes, dtype=dtype, shape=(rows, cols), eps=e,
                     gamma=draw(st.sampled_from(affine_kinds)),
                     beta=draw(st.sampled_from(affine_kinds)) if beta else "absent",
                     kappa=10.0 ** draw(st.floats(0, 7)), seed=draw(st.integers(0, 2**64 - 1)), op=op)

    return draw_case()


def rmsnorm_inputs(dtype="f32", *, classes=None, max_rows=8, max_cols=256, eps=None, affine=True, beta=False):
    """Strategy of lnorm.Case with op "rmsnorm": the same classes, widths and eps edges, drawn for
    RMSNorm (tiny rows sit at 0, so mean(x^2) << eps; huge rows reach where x^2 overflows f32). No
    beta unless beta=True (most RMSNorms have none). case.reference() gives (y, rstd)."""
    return layernorm_inputs(dtype, classes=classes, max_rows=max_rows, max_cols=max_cols, eps=eps, affine=affine,
                            op="rmsnorm", beta=beta)
