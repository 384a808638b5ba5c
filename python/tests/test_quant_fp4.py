"""FP4 (OCP E2M1) through Python: decode from the bit layout and the packing written out here (OCP MX v1.0
table 6; two codes a byte, element 2i in byte i's low nibble, as FlashInfer's and torchao's FP4 tensors and PTX's
cvt.rn.satfinite.e2m1x2 store them), and reference, check and run agreeing on packed q."""
import numpy as np
import pytest

import lnorm

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
        if k not in lnorm.kernels():
            continue
        q2, s2 = lnorm.run(k, x, g, quant="fp4_e2m1", scaling=scaling, op=op)
        assert q2.shape == q.shape
        assert lnorm.check(x, q2, g, quant="fp4_e2m1", scaling=scaling, scales=s2, op=op)
    swapped = ((q & 0x0F) << 4) | (q >> 4)  # element 2i in the high nibble: the packing slip
    assert not lnorm.check(x, swapped.astype(np.uint8), g, quant="fp4_e2m1", scaling=scaling, scales=s, op=op)


def test_odd_rows_are_refused():
    with pytest.raises(ValueError, match="two codes a byte"):
        lnorm.reference(np.ones((2, 63), np.float32), quant="fp4_e2m1", scaling="row")
