"""Gating LayerNorm implementations with lnorm from pytest: the file to copy.

Run:  PYTHONPATH=build/release/python /usr/bin/python3 -m pytest examples/python
(ctest runs it as python_examples). Three implementations:

- torch.nn.functional.layer_norm (Debian's python3-torch, CPU), gated by the ten properties of
  `lnorm verify` and by the exact reference on the suite's hard inputs;
- a NumPy two-pass LayerNorm (float64 statistics): passes;
- a NumPy E[x^2] - E[x]^2 LayerNorm in float32 (llm.c's kernels 4-5): fine on data with mean ~ 0,
  wrong on offset rows (kappa = |mean|/std large) — lnorm must catch it, and this file asserts so.
"""

import numpy as np
import pytest

import lnorm

torch = pytest.importorskip("torch", reason="python3-torch is not installed (scripts/install-deps.sh)")


# ---- the implementations under test: fn(x, gamma, beta, eps) on (rows, cols) arrays ----

def torch_layer_norm(x, gamma, beta, eps):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], gamma, beta, eps)


def numpy_two_pass(x, gamma, beta, eps):
    x64 = x.astype(np.float64)
    mean = x64.mean(-1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(-1, keepdims=True)
    y = (x64 - mean) / np.sqrt(var + eps)
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y.astype(x.dtype)


def numpy_e_x2(x, gamma, beta, eps):
    mean = x.mean(-1, keepdims=True, dtype=np.float32)
    var = (x * x).mean(-1, keepdims=True, dtype=np.float32) - mean * mean  # cancels on offset rows
    y = (x - mean) / np.sqrt(var + np.float32(eps))
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y.astype(np.float32)


# ---- what torch's CPU layer_norm does (torch 1.13.1, Debian 12; README "Python" keeps this list) ----
# Each reason is what lnorm.verify found and the tests below pin down; the budget lists them as
# expected failures, so the suite gates everything else, and a fixed torch shows up as "xpass?".

TORCH_F32_BUDGET = {"expected_failures": {
    "normalized": "rows with |x| above ~1.8e19 (x*x overflows f32) give NaN: constant and huge rows",
    "accuracy": "offset rows lose up to ~2*kappa scaled ulps (budget 8 + 1*kappa); huge rows give NaN",
    "eps_edges": "y = x*rstd - mean*rstd: a width-1 or constant row gives a residue, not exactly beta",
    "permutation": "offset rows: the ~2*kappa error depends on the order of the elements",
}}


def test_torch_layer_norm_f32_under_the_property_suite():
    r = lnorm.verify(lnorm.torch_kernel(torch_layer_norm), dtypes=("f32",), budget=TORCH_F32_BUDGET)
    print(r)
    assert r, str(r)


@pytest.mark.parametrize("case", lnorm.cases(classes=("normal", "uniform", "sparse", "subnormal", "nonfinite"),
                                             widths=(2, 3, 17, 64, 65, 1000), eps=1e-5, seed=7),
                         ids=lambda c: c.description.split()[1] + "-" + str(c.x.shape[-1]))
def test_torch_layer_norm_within_the_default_budget_on_rows_without_offset(case):
    x = torch.from_numpy(case.x)
    g = None if case.gamma is None else torch.from_numpy(case.gamma)
    b = None if case.beta is None else torch.from_numpy(case.beta)
    y = torch.nn.functional.layer_norm(x, x.shape[-1:], g, b, case.eps)
    lnorm.assert_layernorm_close(x, y, g, b, eps=case.eps)


def test_torch_layer_norm_offset_rows_lose_about_twice_kappa():
    worst = 0.0
    for seed in range(8):
        for kappa in (1e2, 1e4, 1e6):
            c = lnorm.case("offset", shape=(8, 1024), kappa=kappa, seed=seed)
            r = lnorm.check(c.x, torch_layer_norm(torch.from_numpy(c.x), None, None, 1e-5))
            w = r.worst_over_budget  # the element furthest over its own allowance, 8 + 1*kappa
            worst = max(worst, w["error"] / w["allowed"])
    # Measured 1.53 x its allowance over these 24 cases (2 of them fail the default budget; 2.05 x over 140 cases
    # with the element of the largest error, before rows with var << eps were measured against their own spread);
    # 3 says "about 2 kappa", not 10 or 100.
    assert 1 < worst < 3, worst


def test_torch_layer_norm_bf16_is_not_f32_rounded_once():
    """torch 1.13's CPU layer_norm in bf16 is not f32 arithmetic rounded once (what its f32 twin, cast to bf16, is):
    47% of outputs correctly rounded, up to 2.4 bf16 ulps (1.6e5 f32 ulps) past the interval of their exact value,
    and biased (+38 f32 ulps on average, bound 2). The gate that counted bf16 errors in bf16 ulps (8 of them) passed
    it; the f32 computation rounded once passes with every output within 8 f32 ulps."""
    rng = np.random.default_rng(3)
    bf = lambda a: torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16)
    x, g, b = bf(rng.standard_normal((256, 1024))), bf(1 + 0.1 * rng.standard_normal(1024)), bf(0.1 * rng.standard_normal(1024))
    r = lnorm.check(x, torch_layer_norm(x, g, b, 1e-5), g, b, eps=1e-5)
    assert not r and r.correctly_rounded < 0.6 and not r.bias["pass"], str(r)
    assert r.max_ulp > 2 ** 16  # more than a bf16 ulp past one rounding
    f32_once = torch_layer_norm(x.float(), g.float(), b.float(), 1e-5).to(torch.bfloat16)
    ok = lnorm.check(x, f32_once, g, b, eps=1e-5)
    assert ok and ok.max_ulp < 8, str(ok)


def test_torch_layer_norm_findings_still_hold():
    # If one of these fails, torch changed: update TORCH_F32_BUDGET and README "Python".
    y = torch_layer_norm(torch.full((1, 8), 1e20), None, None, 1e-5)
    assert torch.isnan(y).all()  # exact answer: 0 (a constant row)
    x = torch.tensor([[1234.5], [-0.7], [3.0]])
    y = torch_layer_norm(x, None, None, 1e-5)
    assert (y != 0).any()  # exact answer: 0 for every width-1 row
    assert lnorm.check(x, y).nonfinite_mismatches == 0


def test_numpy_two_pass_passes_the_property_suite():
    with np.errstate(all="ignore"):  # NaN/Inf rows and eps = 0 constant rows
        r = lnorm.verify(numpy_two_pass, dtypes=("f32", "f16"))
    assert r, str(r)


def test_numpy_e_x2_is_caught_on_offset_rows():
    with np.errstate(all="ignore"):
        r = lnorm.verify(numpy_e_x2, dtypes=("f32",), properties=("accuracy",))
    assert not r, "lnorm.verify passed E[x^2]-E[x]^2: the harness missed the cancellation"
    # The same kernel on rows with mean ~ 0 is within budget, on offset rows it is not.
    normal = lnorm.case("normal", shape=(8, 256), seed=1)
    offset = lnorm.case("offset", shape=(8, 256), kappa=1e3, seed=1)
    with np.errstate(all="ignore"):
        assert lnorm.check(normal.x, numpy_e_x2(normal.x, None, None, 1e-5))
        result = lnorm.check(offset.x, numpy_e_x2(offset.x, None, None, 1e-5))
    assert not result and result.max_ulp_kappa > 100, str(result)
