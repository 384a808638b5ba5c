"""Writes the committed recipe examples (README.md here): torch RMSNorms as the model code ships them, in
bf16, and variants that skip a rounding the recipe has. Run from this folder:

    /usr/bin/python3 make_examples.py

The files are committed (16 x 1024 bf16 values each, as uint16 bit patterns: lnorm's --dtype bf16), so
`lnorm check --recipe` can be shown and tested without torch. Rerunning gives the same bits (seeded).
"""

import numpy as np
import torch

EPS = 1e-6
ROWS, COLS = 16, 1024


def bits(t):
    return t.contiguous().view(torch.int16).numpy().view(np.uint16)


def llama_rmsnorm(x, w):
    """transformers' LlamaRMSNorm.forward: normalize in f32, cast to x's dtype, then weight * it (bf16)."""
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)
    return w * h.to(x.dtype)


def no_cast_rmsnorm(x, w):
    """The same arithmetic without the intermediate cast: one rounding at the end (what a fused kernel
    computing in f32 gives); not the llama recipe."""
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)
    return (w.float() * h).to(x.dtype)


def gemma_rmsnorm(x, w_centred):
    """transformers' GemmaRMSNorm.forward: (1 + w) in f32, one cast at the end."""
    h = x.float()
    out = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)
    return (out * (1.0 + w_centred.float())).type_as(x)


def fused_add_rmsnorm(x, residual, w):
    """vLLM's fused_add_rms_norm: h = x + residual rounded to bf16 (the residual stream, written back),
    then the Llama RMSNorm of h as stored."""
    h = x + residual
    return h, llama_rmsnorm(h, w)


def fused_add_rmsnorm_f32_sum(x, residual, w):
    """The same, but the statistics and the normalized value come from the f32 sum, before h is rounded
    (h is still written in bf16): the llama+unrounded_h recipe."""
    s = x.float() + residual.float()
    n = s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + EPS)
    return s.to(x.dtype), w * n.to(x.dtype)


def main():
    rng = np.random.default_rng(23)
    bf16 = lambda a: torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16)
    x = bf16(rng.standard_normal((ROWS, COLS)))
    residual = bf16(4 * rng.standard_normal((ROWS, COLS)))
    w = bf16(1 + 0.1 * rng.standard_normal(COLS))
    w_centred = bf16(0.1 * rng.standard_normal(COLS))
    h, y_add = fused_add_rmsnorm(x, residual, w)
    h32, y_add32 = fused_add_rmsnorm_f32_sum(x, residual, w)
    assert torch.equal(h, h32)  # both write the same h; only the statistics' input differs
    out = {
        "x": x, "w": w, "w_centred": w_centred, "residual": residual, "h": h,
        "y_llama": llama_rmsnorm(x, w), "y_no_cast": no_cast_rmsnorm(x, w), "y_gemma": gemma_rmsnorm(x, w_centred),
        "y_add_llama": y_add, "y_add_llama_f32_sum": y_add32,
    }
    for name, t in out.items():
        np.save(f"{name}.npy", bits(t))


if __name__ == "__main__":
    main()
