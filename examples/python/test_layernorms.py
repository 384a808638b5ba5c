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


# ---- what torch's CPU layer_norm is known to do (README "Python": what lnorm.verify finds) ----

TORCH_BUDGET = {
    "f32": {"expected_failures": {}},
}


def test_torch_layer_norm_f32_passes_the_property_suite():
    r = lnorm.verify(lnorm.torch_kernel(torch_layer_norm), dtypes=("f32",), budget=TORCH_BUDGET["f32"])
    print(r)
    assert r, str(r)


@pytest.mark.parametrize("case", lnorm.cases(classes=("normal", "offset", "exact_stats", "sparse"), max_width=65,
                                             eps=1e-5, seed=7), ids=lambda c: c.description.split(" shape")[0])
def test_torch_layer_norm_matches_the_exact_answer_on_hard_rows(case):
    x = torch.from_numpy(case.x)
    g = None if case.gamma is None else torch.from_numpy(case.gamma)
    b = None if case.beta is None else torch.from_numpy(case.beta)
    y = torch.nn.functional.layer_norm(x, x.shape[-1:], g, b, case.eps)
    lnorm.assert_layernorm_close(x, y, g, b, eps=case.eps)


def test_numpy_two_pass_passes_the_property_suite():
    with np.errstate(invalid="ignore", divide="ignore"):  # NaN/Inf rows and eps = 0 constant rows
        r = lnorm.verify(numpy_two_pass, dtypes=("f32", "f16"))
    assert r, str(r)


def test_numpy_e_x2_is_caught_on_offset_rows():
    with np.errstate(invalid="ignore", divide="ignore"):
        r = lnorm.verify(numpy_e_x2, dtypes=("f32",), properties=("accuracy",))
    assert not r, "lnorm.verify passed E[x^2]-E[x]^2: the harness missed the cancellation"
    # The same kernel on rows with mean ~ 0 is within budget, on offset rows it is not.
    normal = lnorm.case("normal", shape=(8, 256), seed=1)
    offset = lnorm.case("offset", shape=(8, 256), kappa=1e3, seed=1)
    with np.errstate(invalid="ignore"):
        assert lnorm.check(normal.x, numpy_e_x2(normal.x, None, None, 1e-5))
        result = lnorm.check(offset.x, numpy_e_x2(offset.x, None, None, 1e-5))
    assert not result and result.max_ulp_kappa > 100, str(result)
