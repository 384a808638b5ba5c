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


def test_the_part_tables_are_exported_and_every_format_runs():
    # lnorm.QUANT_FORMATS and lnorm.SCALINGS are the part tables' rows (lnorm/quant.hpp): each format runs.
    assert "fp8_e4m3" in lnorm.QUANT_FORMATS and "group:G" in lnorm.SCALINGS
    x = rows()
    for f in lnorm.QUANT_FORMATS:
        q, s = lnorm.reference(x, quant=f, scaling="row")
        assert q.dtype == (np.int8 if f.startswith("int") else np.uint8) and s.dtype == np.float32


def test_misuse_is_refused():
    x = rows()
    with pytest.raises(ValueError, match="scaling=tensor: needs scale=S"):
        lnorm.reference(x, quant="fp8_e4m3")
    with pytest.raises(ValueError, match="scale"):
        lnorm.reference(x, quant="fp8_e4m3")  # tensor scaling needs its scale
    with pytest.raises(ValueError, match="mx scaling takes fp8"):
        lnorm.reference(x, quant="int8", scaling="mx")
    with pytest.raises(ValueError, match="not an f32 value"):
        lnorm.reference(x, quant="int8", scale=0.1)
    q, s = lnorm.reference(x, quant="int8", scaling="row")
    with pytest.raises(ValueError, match="scales= is required"):
        lnorm.check(x, q, quant="int8", scaling="row")
    with pytest.raises(TypeError, match="int8"):
        lnorm.check(x, q.view(np.uint8), quant="int8", scaling="row", scales=s)
    # Refusals in the CLI's words and Python's exception types, never pybind11's "Unable to cast".
    for bad in ("abc", "0.5", True, [0.5], np.array([0.5], np.float32)):
        with pytest.raises(TypeError, match="scale=: expected a number"):
            lnorm.reference(x, quant="int8", scale=bad)
    with pytest.raises(ValueError, match="greater than 0"):
        lnorm.reference(x, quant="int8", scale=0.0)
    assert lnorm.reference(x, quant="int8", scale=np.float32(0.0078125))[0].dtype == np.int8  # a NumPy scalar is a number
    for call in (lambda: lnorm.reference(x, scale=0.5), lambda: lnorm.run("naive", x, scale=0.5),
                 lambda: lnorm.check(x, x, scale=0.5), lambda: lnorm.reference(x, scaling="row"),
                 lambda: lnorm.check(x, x, scales=s)):
        with pytest.raises(ValueError, match="needs quant="):
            call()
    # Scales in the other byte order are the same numbers: taken (copied to native order), as for x.
    assert lnorm.check(x, q, quant="int8", scaling="row", scales=s.astype(">f4"))



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


def test_quant_y_gates_the_quantizer_on_the_y_it_was_handed():
    # RMSNorm rows of +-1 with eps 0: y* = +-gamma exactly; gamma 272 is the E4M3 tie between 256 (even) and 288.
    # A quantizer breaking ties away from zero writes 288: 0.5 quanta from y*/s, inside q's budget, so check alone
    # passes it; given the y it was handed (quant_y=), its codes are not Q(y/s) and it fails.
    rng = np.random.default_rng(7)
    x = np.where(rng.random((4, 64)) < 0.5, -1.0, 1.0).astype(np.float32)
    g = np.full(64, 272.0, np.float32)
    g[5] = 101.0  # no tie
    y = x * g
    q, _ = lnorm.reference(x, g, op="rmsnorm", eps=0, quant="fp8_e4m3", scale=1.0)
    away = q.copy()
    ties = np.abs(y) == 272.0
    away[ties] = np.where(y[ties] > 0, 0x79, 0xF9).astype(np.uint8)  # +-288
    assert lnorm.decode(away[ties], "fp8_e4m3").tolist() == [288.0 if v > 0 else -288.0 for v in y[ties]]
    kw = dict(op="rmsnorm", eps=0, quant="fp8_e4m3", scale=1.0)
    assert lnorm.check(x, away, g, **kw)  # q's budget alone cannot tell
    exact = lnorm.check(x, q, g, quant_y=y, **kw)
    assert exact and exact.consistency["pass"] and exact.consistency["codes_differ"] == 0, str(exact)
    r = lnorm.check(x, away, g, quant_y=y, **kw)
    assert not r and r.q["pass"] and not r.consistency["pass"], str(r)
    assert r.consistency["codes_differ"] == int(ties.sum())
    first = r.consistency["first"][0]
    assert abs(first["got"]) == 288.0 and abs(first["expected"]) == 256.0
    assert "consistency FAIL" in str(r)
    with pytest.raises(TypeError, match="quant_y"):
        lnorm.check(x, q, g, quant_y=y.astype(np.float64), **kw)
    with pytest.raises(ValueError, match="needs quant="):
        lnorm.check(x, y, g, op="rmsnorm", eps=0, quant_y=y)
