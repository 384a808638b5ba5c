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
