#!/usr/bin/env python3
"""A peer for `lnorm report --peer`: LayerNorm the way NumPy code usually writes it.

    lnorm report --out DIR --peer numpy='/usr/bin/python3 reports/peers/numpy_layernorm.py \
        --x {x} --gamma {gamma} --beta {beta} --y {y} --mean {mean} --rstd {rstd} --eps {eps} --dtype {dtype}'

Statistics with x.mean() and x.var() (pairwise sums) in float32 for f32/f16/bf16 data, float64 for
f64; y = (x - mean) / sqrt(var + eps) * gamma + beta, rounded to the storage type. bf16 arrives and
leaves as uint16 bit patterns ('<u2'), as everywhere in lnorm. Any framework can be wired in the same
way: read the three .npy files, write y (and mean/rstd if it has them).
"""
import argparse

import numpy as np


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x):
    """Round to nearest even, NaN kept quiet."""
    bits = x.astype(np.float32).view(np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = np.isnan(x)
    rounded[nan] = (bits[nan] >> 16) | 0x40
    return rounded.astype(np.uint16)


def main():
    p = argparse.ArgumentParser()
    for name in ("x", "gamma", "beta", "y", "mean", "rstd", "dtype"):
        p.add_argument("--" + name, required=True)
    p.add_argument("--eps", type=float, required=True)
    a = p.parse_args()
    load = (lambda f: bf16_to_f32(np.load(f))) if a.dtype == "bf16" else np.load
    work = np.float64 if a.dtype == "f64" else np.float32
    x, gamma, beta = (load(f).astype(work) for f in (a.x, a.gamma, a.beta))
    with np.errstate(all="ignore"):
        mean = x.mean(axis=-1, keepdims=True, dtype=work)
        var = x.var(axis=-1, keepdims=True, dtype=work)
        rstd = (1 / np.sqrt(var + work(a.eps))).astype(work)
        y = (x - mean) * rstd * gamma + beta
    if a.dtype == "bf16":
        y = f32_to_bf16(y)
    elif a.dtype == "f16":
        y = y.astype(np.float16)
    np.save(a.y, y)
    np.save(a.mean, mean.reshape(-1))
    np.save(a.rstd, rstd.reshape(-1))


if __name__ == "__main__":
    main()
