"""lnorm.verify(fn, dir="bwd"): the backward's laws with a Python callable as the kernel. The exact gradients pass
every property; a textbook NumPy backward from the saved statistics passes; a backward without its mean(g) term
fails the law that catches it; every way a callable can misbehave is its property's failure with a message."""

import numpy as np
import pytest

import lnorm


def exact_backward(x, dy, gamma, beta, eps, gamma_offset=0.0, op="layernorm"):
    bf16 = x.dtype == np.uint16
    dx, dg, db = lnorm.reference_backward(x, dy, gamma, eps=eps, dtype="bf16" if bf16 else None, threads=1, op=op,
                                          gamma_offset=gamma_offset)
    return dx, dg if gamma is not None else None, db if beta is not None else None


def numpy_backward(x, dy, gamma, beta, eps, mean=None, rstd=None):
    """The textbook LayerNorm backward in float64, each gradient rounded once: from the forward's saved statistics
    where they are finite and rstd > 0, else recomputed (two-pass in float64: the saved rstd of a subnormal row
    with eps = 0 is +Inf in float32)."""
    with np.errstate(all="ignore"):  # NaN/Inf rows and overflow are the suite's inputs
        x64, dy64 = x.astype(np.float64), dy.astype(np.float64)
        w = np.ones(x.shape[1]) if gamma is None else gamma.astype(np.float64)
        m64 = x64.mean(axis=1)
        r64 = 1 / np.sqrt(((x64 - m64[:, None]) ** 2).mean(axis=1) + eps)
        if mean is not None:
            ok = np.isfinite(mean) & np.isfinite(rstd) & (rstd > 0)
            m64 = np.where(ok, mean.astype(np.float64), m64)
            r64 = np.where(ok, rstd.astype(np.float64), r64)
        r = r64[:, None]
        xhat = (x64 - m64[:, None]) * r
        g = dy64 * w
        dx = r * (g - g.mean(axis=1, keepdims=True) - xhat * (g * xhat).mean(axis=1, keepdims=True))
        dg = None if gamma is None else (dy64 * xhat).sum(axis=0).astype(gamma.dtype)
        db = None if beta is None else dy64.sum(axis=0).astype(beta.dtype)
        return dx.astype(x.dtype), dg, db


# determinism tiles each case to 2^18 elements and calls fn at 4 thread counts: ~90 s with the exact reference as
# fn (measured), so the exact callables leave it to the NumPy backward below.
def _all_but_determinism(props):
    return tuple(p for p in props if p != "determinism")


def test_the_exact_gradients_as_a_callable_pass_every_backward_property_f32_and_bf16():
    r = lnorm.verify(exact_backward, dir="bwd", dtypes=("f32", "bf16"), cases=12,
                     properties=_all_but_determinism(lnorm.BACKWARD_PROPERTIES))
    assert r, str(r)
    assert {o.property for o in r.outcomes} == set(lnorm.BACKWARD_PROPERTIES) - {"determinism"}
    assert {o.op for o in r.outcomes} == {"layernorm_bwd"} and {o.status for o in r.outcomes} <= {"pass", "skipped"}
    assert "dx_sum_zero" in lnorm.BACKWARD_PROPERTIES and "accuracy" in lnorm.BACKWARD_PROPERTIES


def test_the_exact_rmsnorm_gradients_pass_rmsnorms_backward_properties():
    def exact_rms(x, dy, gamma, beta, eps, gamma_offset=0.0):
        return exact_backward(x, dy, gamma, beta, eps, gamma_offset, op="rmsnorm")

    r = lnorm.verify(exact_rms, op="rmsnorm", dir="bwd", cases=12,
                     properties=_all_but_determinism(lnorm.RMSNORM_BACKWARD_PROPERTIES))
    assert r, str(r)
    assert {o.property for o in r.outcomes} == set(lnorm.RMSNORM_BACKWARD_PROPERTIES) - {"determinism"}
    assert {o.op for o in r.outcomes} == {"rmsnorm_bwd"}
    assert "dx_sum_zero" not in lnorm.RMSNORM_BACKWARD_PROPERTIES  # RMSNorm is not shift invariant


def test_a_numpy_backward_from_the_saved_statistics_is_given_them_and_passes_accuracy():
    seen = []

    def textbook(x, dy, gamma, beta, eps, *, mean, rstd):
        seen.append((mean.dtype, rstd.shape, x.shape[0]))
        return numpy_backward(x, dy, gamma, beta, eps, mean, rstd)

    r = lnorm.verify(textbook, dir="bwd", properties=("accuracy", "dx_sum_zero", "determinism"), cases=12)
    assert r, str(r)
    assert seen and all(m == np.float32 and s == (rows,) for m, s, rows in seen)


def test_a_backward_without_its_mean_g_term_fails_the_shift_law_with_a_reproduction():
    def no_mean_g(x, dy, gamma, beta, eps, *, mean, rstd):
        # dx = rstd*(g - xhat*mean(g*xhat)): RMSNorm's formula applied to LayerNorm
        dx, dg, db = numpy_backward(x, dy, gamma, beta, eps, mean, rstd)
        w = np.ones(x.shape[1]) if gamma is None else gamma.astype(np.float64)
        mg = (dy.astype(np.float64) * w).mean(axis=1, keepdims=True)
        return (dx.astype(np.float64) + rstd.astype(np.float64)[:, None] * mg).astype(x.dtype), dg, db

    r = lnorm.verify(no_mean_g, dir="bwd", properties=("dx_sum_zero", "accuracy"), cases=24)
    assert not r
    assert r.outcome("dx_sum_zero").failed and r.outcome("accuracy").failed
    o = r.outcome("dx_sum_zero")
    assert o.reproduce.startswith('lnorm.verify(no_mean_g, dir="bwd", dtypes=("f32", ), properties=("dx_sum_zero", )')


def test_misbehaving_backward_callables_fail_their_property_with_the_reason():
    def returns_dx_only(x, dy, gamma, beta, eps):
        return exact_backward(x, dy, gamma, beta, eps)[0]

    def wrong_dgamma_dtype(x, dy, gamma, beta, eps):
        dx, dg, db = exact_backward(x, dy, gamma, beta, eps)
        return dx, None if dg is None else dg.astype(np.float64), db

    def none_for_dx(x, dy, gamma, beta, eps):
        return (None,) + exact_backward(x, dy, gamma, beta, eps)[1:]

    m = lambda fn: lnorm.verify(fn, dir="bwd", properties=("accuracy",), cases=12).outcome("accuracy")
    assert "expected (dx, dgamma, dbeta)" in m(returns_dx_only).message
    assert "fn returned dgamma of dtype float64; expected float32" in m(wrong_dgamma_dtype).message
    assert "fn returned None for dx" in m(none_for_dx).message


def test_a_forward_signature_given_to_the_backward_is_said_once():
    def forward(x, gamma, beta, eps):
        return x

    with pytest.raises(TypeError, match=r"lnorm.verify calls fn\(x, dy, gamma, beta, eps\)"):
        lnorm.verify(forward, dir="bwd")
    with pytest.raises(ValueError, match="dir='bwd'"):
        lnorm.verify(exact_backward, op="layernorm_bwd")
    with pytest.raises(ValueError, match="expected 'fwd' or 'bwd'"):
        lnorm.verify(exact_backward, dir="backward")


def test_torch_layer_norm_backward_through_autograd():
    # What torch's backward does on the suite's rows is examples/python/test_layernorm_backward.py's; here, that
    # the adapter hands verify autograd's gradients (no error of its own on any case).
    torch = pytest.importorskip("torch")
    k = lnorm.torch_kernel(torch.nn.functional.layer_norm, dir="bwd")
    r = lnorm.verify(k, dir="bwd", properties=("shape", "accuracy"), cases=12)
    assert r.outcome("shape").status == "pass", str(r)
    assert "fn raised" not in r.outcome("accuracy").message and "fn returned" not in r.outcome("accuracy").message
    with pytest.raises(ValueError, match=r"torch_kernel\(\.\.\., dir='bwd'\)"):
        lnorm.verify(k)


def test_a_backward_budget_dict_tightens_dx_and_expected_failures_hold():
    # A textbook backward from the saved f32 statistics loses ~kappa ulps on offset rows: over 0.5 + 0*kappa.
    def textbook(x, dy, gamma, beta, eps, *, mean, rstd):
        return numpy_backward(x, dy, gamma, beta, eps, mean, rstd)

    tight = {"dx": {"a": 0.5, "b": 0, "reason": "correctly rounded only"}}
    r = lnorm.verify(textbook, dir="bwd", properties=("accuracy",), cases=24, budget=tight)
    assert r.outcome("accuracy").failed and "dx" in r.outcome("accuracy").message
    assert r.budgets == "budget"  # the given sections, not budgets.toml
    xfail = {**tight, "expected_failures": {"accuracy": "the saved mean costs kappa ulps"}}
    assert lnorm.verify(textbook, dir="bwd", properties=("accuracy",), cases=24, budget=xfail)
    with pytest.raises(ValueError, match="reason"):
        lnorm.verify(textbook, dir="bwd", budget={"dx": {"a": 1}})
