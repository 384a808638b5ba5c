"""ROCm's FNUZ formats through Python: decode from the bit layout (LLVM's Float8E4M3FNUZ and
Float8E5M2FNUZ, written out here), and reference, check and run agreeing on them."""
import math

import numpy as np
import pytest

import lnorm


def fnuz_value(code, mbits, bias):
    """The value of an FNUZ code, from its layout: 0x80 NaN, no Inf, no -0."""
    if code == 0x80:
        return math.nan
    ebits = 7 - mbits
    e, m = (code >> mbits) & ((1 << ebits) - 1), code & ((1 << mbits) - 1)
    mag = m / (1 << mbits) * 2.0 ** (1 - bias) if e == 0 else (1 + m / (1 << mbits)) * 2.0 ** (e - bias)
    return -mag if code & 0x80 else mag


@pytest.mark.parametrize("fmt, mbits, bias, top", [("fp8_e4m3fnuz", 3, 8, 240.0), ("fp8_e5m2fnuz", 2, 16, 57344.0)])
def test_decode_is_the_bit_layout(fmt, mbits, bias, top):
    assert fmt in lnorm.QUANT_FORMATS
    codes = np.arange(256, dtype=np.uint8)
    got = lnorm.decode(codes, fmt)
    want = np.array([fnuz_value(int(c), mbits, bias) for c in codes])
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.isnan(got).sum() == 1
    assert np.array_equal(got[~np.isnan(got)], want[~np.isnan(want)])
    assert got[0x7f] == top and got[0xff] == -top


@pytest.mark.parametrize("fmt", ["fp8_e4m3fnuz", "fp8_e5m2fnuz"])
@pytest.mark.parametrize("scaling", ["row", "group:32"])
def test_reference_check_and_run_agree(fmt, scaling):
    # Rows of ±pairs, a 0 and a ±1e-30: the mean is ±1e-30/128, so the 0's y* is a tiny value of the other sign and
    # the 1e-30's one of its own: both round to zero, from below in every other row.
    v = np.random.default_rng(5).standard_normal((6, 63)).astype(np.float32)
    tiny = (np.float32(1e-30) * np.array([-1, 1, -1, 1, -1, 1], np.float32))[:, None]
    x = np.concatenate([v, -v, np.zeros((6, 1), np.float32), tiny], axis=1)
    q, s = lnorm.reference(x, quant=fmt, scaling=scaling)
    assert q.dtype == np.uint8 and not (q == 0x80).any()  # finite rows: never the NaN code, never a -0
    assert lnorm.check(x, q, quant=fmt, scaling=scaling, scales=s)
    q2, s2 = lnorm.run("avx2_cr", x, quant=fmt, scaling=scaling)  # correctly rounded: the reference's bits
    assert np.array_equal(q, q2) and np.array_equal(s, s2)
    assert (q == 0).any()  # the rows hold values that round to zero, of both signs
    bad = q.copy()
    bad[q == 0] = 0x80  # OCP's -0 habit: FNUZ's NaN
    assert not lnorm.check(x, bad, quant=fmt, scaling=scaling, scales=s)


def test_mx_refuses_fnuz():
    x = np.ones((2, 64), np.float32)
    with pytest.raises(ValueError, match="mx scaling takes"):
        lnorm.reference(x, quant="fp8_e4m3fnuz", scaling="mx")
