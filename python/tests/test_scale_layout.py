"""scale_layout= through Python: every format x scaling that stores scales, in the col and swizzled layouts, is the
row layout's scales moved as written out here (col: numpy's moveaxis; swizzled: torchao's to_blocked, its reshapes
copied into numpy); check reads each layout back, and fails swizzled padding that is not 0."""
import numpy as np
import pytest

import lnorm

RUNNABLE = {k.name for k in lnorm.kernels() if "f32" not in k.unavailable}


def to_blocked(m):
    """torchao.prototype.mx_formats.utils.to_blocked, in numpy: [rows, cols] scales padded to 128 x 4 (zeros),
    rearranged into the 32x16 blocks of cuBLAS's block-scaling-factors layout, flattened."""
    rows, cols = m.shape
    nrb, ncb = -(-rows // 128), -(-cols // 4)
    padded = np.zeros((nrb * 128, ncb * 4), m.dtype)
    padded[:rows, :cols] = m
    blocks = padded.reshape(nrb, 128, ncb, 4).transpose(0, 2, 1, 3)
    return blocks.reshape(-1, 4, 32, 4).transpose(0, 2, 1, 3).reshape(-1, 32, 16).ravel()


SPECS = [  # (quant, scaling, extra arguments); one-byte scales first (swizzled takes only those)
    ("fp4_e2m1", "nvfp4", {"global_scale": 64.0}),
    ("fp4_e2m1", "mx", {}),
    ("fp8_e4m3", "mx", {"mx_rule": "even"}),
    ("fp8_e5m2fnuz", "group:32", {"scale_format": "ue8m0"}),
    ("fp8_e4m3", "group:16", {"scale_format": "ue8m0"}),
    ("int8", "row", {"scale_format": "ue8m0"}),
    ("fp8_e4m3", "group:32", {}),
    ("int8", "row", {}),
]


@pytest.mark.parametrize("quant,scaling,extra", SPECS, ids=[f"{q}/{s}{'/' + '/'.join(e.values()) if e else ''}"
                                                           for q, s, e in [(a, b, {k: str(v) for k, v in c.items()})
                                                                           for a, b, c in SPECS]])
def test_layouts_are_the_row_scales_moved(quant, scaling, extra):
    x = np.random.default_rng(11).standard_normal((2, 75, 96)).astype(np.float32)  # 150 rows: a partial row tile
    x[:, :, 7] *= 9
    q, row = lnorm.reference(x, quant=quant, scaling=scaling, op="rmsnorm", **extra)
    per_row = row.shape[-1]
    q_col, col = lnorm.reference(x, quant=quant, scaling=scaling, op="rmsnorm", scale_layout="col", **extra)
    assert np.array_equal(q_col, q)
    assert col.shape == (per_row, 2, 75) and np.array_equal(col, np.moveaxis(row, -1, 0))
    assert lnorm.check(x, q, quant=quant, scaling=scaling, scales=col, op="rmsnorm", scale_layout="col", **extra)
    if row.dtype != np.uint8:  # f32 scales: no tiles
        with pytest.raises(ValueError, match="one-byte scale codes"):
            lnorm.reference(x, quant=quant, scaling=scaling, scale_layout="swizzled", **extra)
        return
    _, sw = lnorm.reference(x, quant=quant, scaling=scaling, op="rmsnorm", scale_layout="swizzled", **extra)
    assert sw.shape == (256 * -(-per_row // 4) * 4,)
    assert np.array_equal(sw, to_blocked(row.reshape(150, per_row)))
    r = lnorm.check(x, q, quant=quant, scaling=scaling, scales=sw, op="rmsnorm", scale_layout="swizzled", **extra)
    assert r and r.scales["layout"] == "swizzled" and r.scales["padding_nonzero"] == 0
    for k in ("avx2_cr", "avx512_cr"):  # the exact kernels' scales: the reference's, through the same conversion
        if k in RUNNABLE:
            _, ks = lnorm.run(k, x, quant=quant, scaling=scaling, op="rmsnorm", scale_layout="swizzled", **extra)
            assert np.array_equal(ks, sw)
    garbage = sw.copy()
    garbage[-1] = 0x7E  # the last byte is padding (rows 150..255)
    bad = lnorm.check(x, q, quant=quant, scaling=scaling, scales=garbage, op="rmsnorm", scale_layout="swizzled", **extra)
    assert not bad and bad.scales["padding_nonzero"] == 1 and "padding" in str(bad)
    moved = np.zeros_like(sw)
    moved[:row.size] = row.ravel()  # row-major bytes handed as swizzled
    assert not lnorm.check(x, q, quant=quant, scaling=scaling, scales=moved, op="rmsnorm", scale_layout="swizzled", **extra)
    with pytest.raises(ValueError, match="scale_layout=swizzled"):
        lnorm.check(x, q, quant=quant, scaling=scaling, scales=row, op="rmsnorm", scale_layout="swizzled", **extra)


def test_layout_refusals():
    x = np.ones((4, 64), np.float32)
    with pytest.raises(ValueError, match="tensor scaling stores no scales"):
        lnorm.reference(x, quant="fp8_e4m3", scale=1.0, scale_layout="col")
    with pytest.raises(ValueError, match="expected row, col or swizzled"):
        lnorm.reference(x, quant="int8", scaling="row", scale_layout="diagonal")
    with pytest.raises(ValueError, match="scale_layout=: needs quant="):
        lnorm.reference(x, scale_layout="col")
