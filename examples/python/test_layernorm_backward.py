"""Gating torch's layer_norm backward with lnorm from pytest: autograd's dx, dgamma and dbeta against the exact
gradients (lnorm.check_backward; the CLI's `lnorm check --dir bwd`), the backward's property suite on torch
through autograd and on a NumPy backward (lnorm.verify(fn, dir="bwd"); the CLI's `lnorm verify --dir bwd`).

Run:  PYTHONPATH=build/release/python /usr/bin/python3 -m pytest examples/python (ctest: python_examples).

What lnorm finds (torch 1.13.1, Debian 12, 64x1024, eps 1e-5, gamma ~ 1 + 0.1 N, dy ~ N; the metric of
docs/DESIGN.md "Backward", with max(1, |xhat|) in the scales, in f32 ulps, a bf16 gradient measured from the
interval that rounds to it: docs/verify.md): on centred rows torch's f32 backward is within 2.5 scaled ulp (dx
2.21, dgamma 1.37, dbeta 1.63; 18-49% correctly rounded). Its bf16 backward is not f32 arithmetic rounded once:
dbeta is summed over the rows in bf16 (bit for bit a sequential bf16 sum: 15.6875 where the exact dbeta is
15.112, 18.75% correctly rounded), dgamma likewise (7.1e4 f32 ulps, 18%), and dx errs by up to 7.2e4 f32 ulps
(1.1 bf16 ulp), each biased; the gate that counted bf16 errors in bf16 ulps passed all three at 2.5.
On offset rows its error grows with kappa = |mean|/std: at mean 100, dx reaches 26 scaled ulp and dgamma 29.5
in f32 (28.1 and 13.8 in bf16) — the backward recomputes xhat from the saved mean and rstd, and x - mean
loses kappa ulps, as a forward pass that rounds its mean does; the default budget, 8 + 1*kappa scaled ulps
as the forward's, admits it.

What `lnorm.verify(lnorm.torch_kernel(F.layer_norm, dir="bwd"), dir="bwd")` finds (quick suite, seed 1; 13 s for
f32 and bf16): shape, row independence, repeatability and linearity in dy hold; four findings fail the rest —
- rows with |x| > ~1.8e19 (constant, huge and bit-pattern rows: x^2 overflows f32 in the forward's statistics)
  give NaN dx where the gradient is finite, even with dy = 0 (dy_zero, dx_sum_zero, dx_orthogonal, accuracy);
- width-1 rows (every xhat is 0, so dx = dgamma = 0 exactly): f32 dgamma is nonzero — 0.0054 for x = 1234.5
  and dy = 0.5 — the "nonzero weight gradient for normalized_shape=(1,)" frameworks have had; in bf16 dx is
  nonzero (0.414 on a 1x1 row: g is rounded to bf16 where mean(g) is not, and rstd = 316 amplifies the difference);
- offset rows: dgamma 1923 scaled ulp at kappa 1760 (8 + 1*kappa allows 1768);
- bf16: dx 1.10 scaled ulp where one rounding of f32 math allows 1 (and dx . (x - mean) = 0.092 where the
  elements' budgets allow 0.078 at eps = 0).
The tests below hold these as expected failures and assert that each is still there.
"""

import numpy as np
import pytest

import lnorm

torch = pytest.importorskip("torch", reason="python3-torch is not installed (scripts/install-deps.sh)")


def torch_grads(dtype, offset, seed=0, rows=64, cols=1024):
    rng = np.random.default_rng(seed)
    t = lambda a: torch.from_numpy(a.astype(np.float32)).to(dtype)
    x = t(offset + rng.standard_normal((rows, cols))).requires_grad_(True)
    g = t(1 + 0.1 * rng.standard_normal(cols)).requires_grad_(True)
    b = t(0.1 * rng.standard_normal(cols)).requires_grad_(True)
    dy = t(rng.standard_normal((rows, cols)))
    torch.nn.functional.layer_norm(x, (cols,), g, b, eps=1e-5).backward(dy)
    return x.detach(), dy, g.detach(), x.grad, g.grad, b.grad


def test_torch_layer_norm_backward_is_within_2_5_scaled_ulp_on_centred_rows_in_f32():
    x, dy, g, dx, dg, db = torch_grads(torch.float32, 0.0)
    r = lnorm.check_backward(x, dy, g, dx=dx, dgamma=dg, dbeta=db, eps=1e-5, max_ulp=2.5, max_ulp_per_kappa=0)
    assert r, str(r)
    assert r.dx["correctly_rounded"] < 0.6  # ... but far from correctly rounded: several f32 roundings per gradient


def test_torch_layer_norm_backward_in_bf16_sums_dbeta_in_bf16_and_fails():
    x, dy, g, dx, dg, db = torch_grads(torch.bfloat16, 0.0)
    r = lnorm.check_backward(x, dy, g, dx=dx, dgamma=dg, dbeta=db, eps=1e-5)
    assert not r, str(r)
    for grad in ("dx", "dgamma", "dbeta"):  # each past 8 f32 ulps, and pushed one way
        assert not getattr(r, grad)["pass"], str(r)
    assert r.dbeta["correctly_rounded"] < 0.3  # measured 0.1875
    # What it is: dbeta summed down the rows in bf16, rounded after every add.
    acc = torch.zeros(dy.shape[1], dtype=torch.bfloat16)
    for row in dy:
        acc = acc + row
    assert torch.equal(acc, db)
    # The exact gradients, and an f32 sum rounded once to bf16, pass.
    ex = lnorm.reference_backward(x, dy, g, eps=1e-5)
    assert lnorm.check_backward(x, dy, g, dx=ex[0], dgamma=ex[1], dbeta=ex[2], eps=1e-5)
    f32_sum = dy.float().sum(0, dtype=torch.float64).float().to(torch.bfloat16)
    assert lnorm.check_backward(x, dy, g, dbeta=f32_sum, eps=1e-5)


def test_torch_layer_norm_backward_loses_kappa_ulps_on_offset_rows():
    x, dy, g, dx, dg, db = torch_grads(torch.float32, 100.0)
    r = lnorm.check_backward(x, dy, g, dx=dx, dgamma=dg, dbeta=db, eps=1e-5, max_ulp_per_kappa=0)
    assert not r, str(r)  # over a flat 8 scaled ulps
    assert r.dx["max_ulp"] > 20 and r.dgamma["max_ulp"] > 20  # measured 26 and 29.5 at kappa ~ 100
    assert r.dx["max_ulp_kappa"] > 50
    # The default budget, 8 + 1*kappa (as the forward's: a kernel that rounds its mean loses ~kappa ulps), holds.
    assert lnorm.check_backward(x, dy, g, dx=dx, dgamma=dg, dbeta=db, eps=1e-5), str(r)
    assert r.dbeta["max_ulp"] < 3  # dbeta = sum of dy does not see x
    # The exact gradients themselves, for comparison: correctly rounded by construction.
    ex = lnorm.reference_backward(x, dy, g, eps=1e-5)
    assert lnorm.check_backward(x, dy, g, dx=ex[0], dgamma=ex[1], dbeta=ex[2], eps=1e-5, max_ulp=0.5)


# lnorm.verify of torch's backward: the findings above as expected failures (non-strict: a seed may not draw a
# huge row), so everything else is gated; test_torch_backward_findings_still_hold fails when torch changes.
TORCH_BWD_FINDINGS = {
    "accuracy": "rows with |x| > ~1.8e19 give NaN dx (x^2 overflows f32); f32 dgamma over 8 + kappa on offset rows",
    "nonfinite": "its clean-input run is an accuracy check: offset-row dgamma (f32), dx 1.1 ulp (bf16)",
    "dx_sum_zero": "NaN dx on rows with |x| > ~1.8e19",
    "dx_orthogonal": "NaN dx on rows with |x| > ~1.8e19; bf16 dx errs by more than one rounding",
    "width_one": "width-1 rows: nonzero dgamma (f32) and dx (bf16) where xhat = 0 makes both exactly 0",
    "dy_zero": "NaN dx on rows with |x| > ~1.8e19 even with dy = 0",
}


def torch_backward_budget():
    return {"expected_failures": {p: {"reason": why, "strict": False} for p, why in TORCH_BWD_FINDINGS.items()}}


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_torch_layer_norm_backward_passes_the_suite_but_its_known_findings(dtype):
    k = lnorm.torch_kernel(torch.nn.functional.layer_norm, dir="bwd")
    r = lnorm.verify(k, dir="bwd", dtypes=(dtype,), budget=torch_backward_budget())
    assert r, str(r)
    for p in ("shape", "row_independence", "determinism", "dy_linearity"):
        assert r.outcome(p, dtype).status == "pass", str(r)


def test_torch_backward_findings_still_hold():
    k = lnorm.torch_kernel(torch.nn.functional.layer_norm, dir="bwd")
    f32 = lnorm.verify(k, dir="bwd", properties=("width_one", "dy_zero"))
    assert "dgamma = " in f32.outcome("width_one").message and "must be 0" in f32.outcome("width_one").message
    assert "nan, must be 0" in f32.outcome("dy_zero").message
    bf16 = lnorm.verify(k, dir="bwd", dtypes=("bf16",), properties=("width_one",))
    assert "dx = " in bf16.outcome("width_one", "bf16").message
    # The width-1 dgamma, directly: exact 0, torch's is not.
    x = torch.tensor([[1234.5]], requires_grad=True)
    g = torch.tensor([0.9], requires_grad=True)
    torch.nn.functional.layer_norm(x, (1,), g, None, eps=1e-5).backward(torch.tensor([[0.5]]))
    assert g.grad.item() != 0 and x.grad.item() == 0


def numpy_layer_norm_backward(x, dy, gamma, beta, eps):
    """A NumPy LayerNorm backward that recomputes the statistics in float64 (two-pass) and rounds each gradient
    once: what lnorm's welford backward does in C++. bf16 arrives as uint16 bits; this one takes f32/f16/f64."""
    with np.errstate(all="ignore"):  # NaN/Inf rows and overflow are the suite's inputs
        x64, dy64 = x.astype(np.float64), dy.astype(np.float64)
        w = np.ones(x.shape[1]) if gamma is None else gamma.astype(np.float64)
        d = x64 - x64.mean(axis=1, keepdims=True)
        rstd = 1 / np.sqrt((d * d).mean(axis=1, keepdims=True) + eps)
        xhat, g = d * rstd, dy64 * w
        dx = rstd * (g - g.mean(axis=1, keepdims=True) - xhat * (g * xhat).mean(axis=1, keepdims=True))
        # One NaN for every NaN column: NumPy's column sums of a NaN/Inf column give +NaN or -NaN depending on
        # the arrays' alignment in memory (which NaN its SIMD blocks meet first), and lnorm's determinism
        # property, which compares bits, caught a second call giving the other sign (f16, 1 call in 6).
        canon = lambda v: np.where(np.isnan(v), np.nan, v)
        dgamma = None if gamma is None else canon((dy64 * xhat).sum(axis=0)).astype(gamma.dtype)
        dbeta = None if beta is None else canon(dy64.sum(axis=0)).astype(beta.dtype)
        return canon(dx).astype(x.dtype), dgamma, dbeta


def test_a_numpy_float64_backward_passes_every_backward_property_f32_and_f16():
    r = lnorm.verify(numpy_layer_norm_backward, dir="bwd", dtypes=("f32", "f16"))
    assert r, str(r)
