"""FP4 (OCP E2M1) through Python: decode from the bit layout and the packing written out here (OCP MX v1.0
table 6; two codes a byte, element 2i in byte i's low nibble, as FlashInfer's and torchao's FP4 tensors and PTX's
cvt.rn.satfinite.e2m1x2 store them), and reference, check and run agreeing on packed q."""
import numpy as np
import pytest

import lnorm

# The kernels this CPU runs (unavailable: the dtypes it declines here, e.g. avx512 on an AVX2-only machine).
RUNNABLE = {k.name for k in lnorm.kernels() if "f32" not in k.unavailable}
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]  # magnitudes of codes 0..7; bit 3 is the sign


def unpack(q):
    """Element 2i from byte i's low nibble, 2i + 1 from its high one; values from the table above."""
    codes = np.stack([q & 0x0F, q >> 4], axis=-1).reshape(*q.shape[:-1], q.shape[-1] * 2)
    mag = np.array(E2M1)[codes & 7]
    return np.where(codes & 8, -mag, mag)


def test_decode_is_the_bit_layout_and_the_packing():
    assert "fp4_e2m1" in lnorm.QUANT_FORMATS
    pairs = np.arange(256, dtype=np.uint8)  # every pair of codes
    got = lnorm.decode(pairs, "fp4_e2m1")
    assert got.shape == (512,)
    assert np.array_equal(got, unpack(pairs)) and not np.isnan(got).any()
    assert np.signbit(got[2 * 0x80 + 1]) and got[2 * 0x80 + 1] == 0  # byte 0x80: its high nibble, code 8, is -0
    assert got[2 * 0x07] == 6 and got[2 * 0x0F] == -6 and got[2 * 0x70 + 1] == 6


@pytest.mark.parametrize("scaling", ["row", "group:16", "mx"])
@pytest.mark.parametrize("op", ["rmsnorm", "layernorm"])
def test_reference_check_and_run_agree(scaling, op):
    x = np.random.default_rng(7).standard_normal((2, 3, 64)).astype(np.float32)
    g = (1 + 0.25 * np.random.default_rng(8).standard_normal(64)).astype(np.float32)
    q, s = lnorm.reference(x, g, quant="fp4_e2m1", scaling=scaling, op=op)
    assert q.dtype == np.uint8 and q.shape == (2, 3, 32)  # x.shape[:axis] + (cols/2,)
    assert lnorm.check(x, q, g, quant="fp4_e2m1", scaling=scaling, scales=s, op=op)
    # The values: y*/s rounded once; from the unpacked codes and the scales, within half a quantum (at most 1, at 4..6)
    y = lnorm.reference(x.astype(np.float64), g.astype(np.float64), op=op)[0]  # f64 x holds f32 x exactly
    scale = lnorm.decode_e8m0(s) if scaling == "mx" else s.astype(np.float64)
    group = 32 if scaling == "mx" else 16 if scaling == "group:16" else 64
    per_elem = np.repeat(scale, group, axis=-1)
    assert np.all(np.abs(unpack(q) - np.clip(y / per_elem, -6, 6)) <= 1.0)
    for k in ("avx2_cr", "avx512", "welford"):  # _cr: the reference's bits; the fast kernels here too (f32 y exact enough)
        if k not in RUNNABLE:
            continue
        q2, s2 = lnorm.run(k, x, g, quant="fp4_e2m1", scaling=scaling, op=op)
        assert q2.shape == q.shape
        assert lnorm.check(x, q2, g, quant="fp4_e2m1", scaling=scaling, scales=s2, op=op)
    swapped = ((q & 0x0F) << 4) | (q >> 4)  # element 2i in the high nibble: the packing slip
    assert not lnorm.check(x, swapped.astype(np.uint8), g, quant="fp4_e2m1", scaling=scaling, scales=s, op=op)


def test_odd_rows_are_refused():
    with pytest.raises(ValueError, match="two codes a byte"):
        lnorm.reference(np.ones((2, 63), np.float32), quant="fp4_e2m1", scaling="row")


E4M3_MAX = 448.0


def e4m3_value(c):
    """A positive E4M3 code's value from its layout (bias 7, 3 mantissa bits; 0x7f NaN)."""
    e, m = (c >> 3) & 15, c & 7
    return m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)


@pytest.mark.parametrize("global_scale", [None, 1.0, 166.39999389648438])
@pytest.mark.parametrize("op", ["rmsnorm", "layernorm"])
def test_nvfp4_reference_check_and_run_agree(global_scale, op):
    x = np.random.default_rng(9).standard_normal((4, 128)).astype(np.float32)
    g = (1 + 0.25 * np.random.default_rng(10).standard_normal(128)).astype(np.float32)
    kw = dict(quant="fp4_e2m1", scaling="nvfp4", op=op, global_scale=global_scale)
    q, s = lnorm.reference(x, g, **kw)
    assert q.shape == (4, 64) and s.shape == (4, 8) and s.dtype == np.uint8  # E4M3 codes, one per 16
    # The block scales from the rule: c = E4M3(amax·G/6), G the tensor's own 2688/amax|y*| when not given
    y = lnorm.reference(x.astype(np.float64), g.astype(np.float64), op=op)[0]
    G = np.float32(2688) / np.float32(np.abs(y).max()) if global_scale is None else np.float32(global_scale)
    t = np.abs(y).reshape(4, 8, 16).max(axis=2) * np.float64(G) / 6
    values = np.array([e4m3_value(c) for c in s.ravel()]).reshape(s.shape)
    assert np.all(np.abs(values - np.minimum(t, E4M3_MAX)) <= np.maximum(values, 2.0 ** -9) / 16 + 1e-12)  # half a step
    assert lnorm.check(x, q, g, scales=s, **kw)
    for k in ("avx2_cr", "avx512_cr", "avx512", "welford"):
        if k not in RUNNABLE:
            continue
        q2, s2 = lnorm.run(k, x, g, **kw)
        if k.endswith("_cr"):  # correctly rounded: the reference's bits
            assert np.array_equal(q, q2) and np.array_equal(s, s2)
        assert lnorm.check(x, q2, g, scales=s2, **kw)
    bad = s.copy()
    bad[0, 0] += 1  # a block scale one code up: the planted rounding slip
    assert not lnorm.check(x, q, g, scales=bad, **kw)


def test_nvfp4_refusals():
    x = np.ones((2, 64), np.float32)
    with pytest.raises(ValueError, match="nvfp4 scaling takes fp4_e2m1"):
        lnorm.reference(x, quant="fp8_e4m3", scaling="nvfp4")
    with pytest.raises(ValueError, match="global"):
        lnorm.reference(x, quant="fp4_e2m1", scaling="mx", global_scale=2.0)
    with pytest.raises(ValueError, match="global_scale"):
        lnorm.reference(x, global_scale=2.0)


@pytest.mark.parametrize("rule", ["floor", "ceil", "even", "rceil"])
@pytest.mark.parametrize("fmt", ["fp4_e2m1", "fp8_e4m3"])
def test_mx_rules(rule, fmt):
    x = np.random.default_rng(11).standard_normal((4, 64)).astype(np.float32)
    kw = dict(quant=fmt, scaling="mx", mx_rule=rule, op="rmsnorm")
    q, s = lnorm.reference(x, **kw)
    y = lnorm.reference(x.astype(np.float64), op="rmsnorm")[0]
    amax = np.abs(y).reshape(4, 2, 32).max(axis=2)
    qmax, emax, mbits = (6.0, 2, 1) if fmt == "fp4_e2m1" else (448.0, 8, 3)
    fl = np.floor(np.log2(amax))  # the rules from their definitions (no amax here lies on a breakpoint)
    level = {"floor": fl, "ceil": np.ceil(np.log2(amax)),
             "even": fl + (amax >= 2.0 ** (fl + 1) * (1 - 2.0 ** -(mbits + 2))),
             "rceil": np.ceil(np.log2(amax / qmax))}[rule]
    X = level - (0 if rule == "rceil" else emax)
    assert np.array_equal(s.astype(np.int64) - 127, X.astype(np.int64))
    assert lnorm.check(x, q, scales=s, **kw)
    for k in ("avx2_cr", "avx512_cr", "avx2", "avx512"):
        if k in RUNNABLE:
            q2, s2 = lnorm.run(k, x, **kw)
            assert np.array_equal(s, s2) and lnorm.check(x, q2, scales=s2, **kw)
    if rule != "floor":  # the floor exponent where the rule says otherwise: the scale gate fails it
        s_floor = lnorm.reference(x, quant=fmt, scaling="mx", op="rmsnorm")[1]
        if not np.array_equal(s_floor, s):
            assert not lnorm.check(x, q, scales=s_floor, **kw)
    with pytest.raises(ValueError, match="mx_rule"):
        lnorm.reference(x, quant=fmt, scaling="row", mx_rule="ceil")


@pytest.mark.parametrize("scaling", ["row", "group:16"])
@pytest.mark.parametrize("fmt", ["fp8_e4m3", "int8"])
def test_ue8m0_scales(scaling, fmt):
    x = np.random.default_rng(13).standard_normal((4, 64)).astype(np.float32)
    kw = dict(quant=fmt, scaling=scaling, scale_format="ue8m0", op="rmsnorm")
    q, s = lnorm.reference(x, **kw)
    assert s.dtype == np.uint8  # E8M0 codes
    y = lnorm.reference(x.astype(np.float64), op="rmsnorm")[0]
    G = 64 if scaling == "row" else 16
    amax = np.abs(y).reshape(4, -1, G).max(axis=2)
    qmax = 448.0 if fmt == "fp8_e4m3" else 127.0
    assert np.array_equal(s.astype(np.int64) - 127, np.ceil(np.log2(amax / qmax)).astype(np.int64))  # 2^ceil(log2(amax/qmax))
    assert lnorm.check(x, q, scales=s, **kw)
    for k in ("avx2_cr", "avx512_cr", "avx2", "avx512"):
        if k in RUNNABLE:
            q2, s2 = lnorm.run(k, x, **kw)
            assert np.array_equal(s, s2) and lnorm.check(x, q2, scales=s2, **kw)
    with pytest.raises(ValueError, match="scale_format"):
        lnorm.reference(x, quant="fp8_e4m3", scaling="mx", scale_format="ue8m0")
