"""Quantized outputs from Python: lnorm.reference/run/check with quant=, decode and decode_e8m0 (docs/python.md)."""

import numpy as np
import pytest

import lnorm


def rows(shape=(8, 256), seed=3):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("quant,scaling,scale", [("fp8_e4m3", "tensor", 0.0078125), ("fp8_e5m2", "row", None),
                                                 ("int8", "group:64", None), ("fp8_e4m3", "mx", None)])
def test_the_exact_q_passes_check_at_100_percent_correctly_rounded(quant, scaling, scale):
    x = rows()
    g = (1 + 0.1 * rows((256,), 4)).astype(np.float32)
    q, s = lnorm.reference(x, g, op="rmsnorm", quant=quant, scaling=scaling, scale=scale)
    assert q.shape == x.shape and q.dtype == (np.int8 if quant == "int8" else np.uint8)
    if scaling == "tensor":
        assert s is None
    else:
        groups = {"row": 1, "group:64": 4, "mx": 8}[scaling]
        assert s.shape == (8, groups) and s.dtype == (np.uint8 if scaling == "mx" else np.float32)
    r = lnorm.check(x, q, g, op="rmsnorm", quant=quant, scaling=scaling, scale=scale, scales=s)
    assert r and r.q["correctly_rounded"] == 1.0 and r.q["max_ulp"] <= 0.5, str(r)
    assert (r.scales is None) == (scaling == "tensor")
    k, ks = lnorm.run("welford", x, g, op="rmsnorm", quant=quant, scaling=scaling, scale=scale)
    assert lnorm.check(x, k, g, op="rmsnorm", quant=quant, scaling=scaling, scale=scale, scales=ks)


def test_decode_gives_the_values_and_a_truncated_q_fails():
    x = rows()
    q, s = lnorm.reference(x, quant="int8", scaling="row")
    y = lnorm.reference(x)[0]
    assert np.all(np.abs(lnorm.decode(q, "int8") * s - y) <= 0.5 * s + 1e-6)
    t = np.clip(np.trunc(y / s), -128, 127).astype(np.int8)
    r = lnorm.check(x, t, quant="int8", scaling="row", scales=s)
    assert not r and r.q["max_ulp"] > 0.5
    assert lnorm.decode(np.array([0x7e, 0xfe, 0x7f, 0x80], np.uint8), "fp8_e4m3")[:2].tolist() == [448.0, -448.0]
    assert np.isnan(lnorm.decode(np.array([0x7f], np.uint8), "fp8_e4m3")[0])
    assert lnorm.decode_e8m0(np.array([127, 0, 254], np.uint8)).tolist() == [1.0, 2.0 ** -127, 2.0 ** 127]


def test_misuse_is_refused():
    x = rows()
    with pytest.raises(ValueError, match="scale"):
        lnorm.reference(x, quant="fp8_e4m3")  # tensor scaling needs its scale
    with pytest.raises(ValueError, match="mx scaling takes fp8"):
        lnorm.reference(x, quant="int8", scaling="mx")
    with pytest.raises(ValueError, match="not a float32"):
        lnorm.reference(x, quant="int8", scale=0.1)
    q, s = lnorm.reference(x, quant="int8", scaling="row")
    with pytest.raises(ValueError, match="scales= is required"):
        lnorm.check(x, q, quant="int8", scaling="row")
    with pytest.raises(TypeError, match="int8"):
        lnorm.check(x, q.view(np.uint8), quant="int8", scaling="row", scales=s)



def e4m3(t):
    """Q(t) for E4M3 (nearest, ties to even, saturating) in NumPy: the code whose value is nearest |t|."""
    vals = lnorm.decode(np.arange(0x7f, dtype=np.uint8), "fp8_e4m3")  # codes 0..0x7e, increasing
    a = np.minimum(np.abs(t).astype(np.float64), 448.0)
    hi = np.clip(np.searchsorted(vals, a), 1, len(vals) - 1)
    lo = hi - 1
    d_lo, d_hi = a - vals[lo], vals[hi] - a
    mag = np.where((d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0)), hi, lo).astype(np.uint8)
    return mag | np.where(np.signbit(t), 0x80, 0).astype(np.uint8)


def test_recipe_vllm_accepts_vllms_arithmetic_and_not_the_exact_q():
    # vLLM's per-token FP8 on f32 x: y in x's dtype, s = f32(amax / 448), q = Q(f32(y * f32(1 / s))).
    x = rows((16, 1024), 5)
    y = lnorm.reference(x, op="rmsnorm")[0]
    s = (np.abs(y).max(axis=1, keepdims=True) / np.float32(448)).astype(np.float32)
    q = e4m3((y * (np.float32(1) / s)).astype(np.float32))
    r = lnorm.check(x, q, op="rmsnorm", quant="fp8_e4m3", scaling="row", scales=s, recipe="vllm")
    assert r and r.recipe["max_ulp"] <= 0.5 and r.recipe["matching"] == 1.0 and r.recipe["scales_differ"] == 0, str(r)
    # The exact scales are f32(amax*/448), one rounding, where the recipe's round amax to f32 first: some differ.
    q_exact, s_exact = lnorm.reference(x, op="rmsnorm", quant="fp8_e4m3", scaling="row")
    e = lnorm.check(x, q_exact, op="rmsnorm", quant="fp8_e4m3", scaling="row", scales=s_exact, recipe="vllm")
    assert e.q["pass"] and (not e.recipe["pass"]) == (e.recipe["scales_differ"] > 0 or e.recipe["max_ulp"] > 0.5)
    with pytest.raises(ValueError, match="name vllm"):
        lnorm.check(x, q, op="rmsnorm", quant="fp8_e4m3", scaling="row", scales=s, recipe="llama")
