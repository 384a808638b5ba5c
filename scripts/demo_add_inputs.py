"""Inputs for scripts/demo.sh's Add & Norm step: three 64x1024 cases, written as OUT/add-<case>-<dtype>-{x,r,g}.npy.

cancel  f32:  |x| ~ |residual| ~ 1e4 and the sum ~ 1 (x = K + v, residual = -K): catastrophic cancellation
stream  bf16: a residual stream 8x larger than the sublayer output, both bf16
fp32res bf16: the same with the residual in f32 beside bf16 x (flash-attn's residual_in_fp32)
"""
import sys

import numpy as np


def bf16(a):
    """f32 -> bf16 bit patterns (uint16), round to nearest even."""
    b = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def main(out):
    rng = np.random.default_rng(23)
    shape = (64, 1024)
    k = 1e4 * (1 + rng.random(shape)) * rng.choice([-1, 1], shape)
    v = rng.standard_normal(shape)
    np.save(f"{out}/add-cancel-f32-x.npy", (k + v).astype(np.float32))
    np.save(f"{out}/add-cancel-f32-r.npy", (-k).astype(np.float32))
    x, r = rng.standard_normal(shape), 8 * rng.standard_normal(shape)
    np.save(f"{out}/add-stream-bf16-x.npy", bf16(x))
    np.save(f"{out}/add-stream-bf16-r.npy", bf16(r))
    np.save(f"{out}/add-fp32res-bf16-x.npy", bf16(x))
    np.save(f"{out}/add-fp32res-bf16-r.npy", r.astype(np.float32))
    for name, dt in (("cancel", "f32"), ("stream", "bf16"), ("fp32res", "bf16")):
        g = (1 + 0.1 * rng.standard_normal(shape[1])).astype(np.float32)
        np.save(f"{out}/add-{name}-{dt}-g.npy", g if dt == "f32" else bf16(g))


if __name__ == "__main__":
    main(sys.argv[1])
