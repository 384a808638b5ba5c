"""A model audit after conversion (docs/python.md "Model audit"): a small transformer built here (no downloads), four
conversions a deployment makes by mistake, and lnorm.torch.compare finding each one.

Run:  PYTHONPATH=build/release/python /usr/bin/python3 examples/python/model_audit.py
(after `pip install --no-build-isolation .`: python3 examples/python/model_audit.py). test_model_audit.py gates it.

The conversions, each a copy of the model with one thing changed:
- eps:      every LayerNorm's eps 1e-5 -> 1e-6 (an exporter's default);
- shape:    the first LayerNorm normalizes over (seq, hidden), its weights broadcast to that shape: the output's
            shape is unchanged and nothing errors;
- affine:   the final RMSNorm's weight dropped (a fused kernel without gamma);
- bf16:     the whole model in bf16;
- fused:    the first LayerNorm replaced by a one-pass kernel (var = E[x^2] - E[x]^2 in f32): on rows far from 0 it
            cancels, and the audit fails it against the exact LayerNorm (offset_inputs()).

What it prints (torch 1.13.1, this repository's CPU): every norm PASS on inputs() (worst 2-3 scaled ulp); compare
names the changed norms, each with what changed. On offset_inputs() torch's LayerNorm reads 1.2-1.7x its budget of
8 + kappa (kappa about 100), the one-pass replacement about 16000 scaled ulp.
"""
import copy

import torch
from torch import nn

HIDDEN, SEQ = 64, 16


class LlamaRMSNorm(nn.Module):
    """transformers' LlamaRMSNorm: a weight and variance_epsilon (the audit finds it by that shape)."""

    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.variance_epsilon = eps

    def forward(self, x):
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.weight * h.to(x.dtype)


class PlainRMSNorm(nn.Module):
    """An RMSNorm without a weight: what a fused kernel that drops gamma computes (eps kept)."""

    def __init__(self, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = None

    def forward(self, x):
        h = x.to(torch.float32)
        return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)


class OnePassLayerNorm(nn.Module):
    """A 'fused' LayerNorm: mean and E[x^2] in one pass, var = E[x^2] - mean^2 (the famous cancellation)."""

    def __init__(self, hidden, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.bias = nn.Parameter(torch.zeros(hidden))
        self.eps = eps

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        var = (x * x).mean(-1, keepdim=True) - mean * mean
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(HIDDEN)
        self.mlp = nn.Sequential(nn.Linear(HIDDEN, 4 * HIDDEN), nn.GELU(), nn.Linear(4 * HIDDEN, HIDDEN))

    def forward(self, x):
        return x + self.mlp(self.ln(x))


class TinyTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])
        self.norm = LlamaRMSNorm(HIDDEN)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.norm(x)


def model():
    torch.manual_seed(0)
    m = TinyTransformer().eval()
    with torch.no_grad():  # trained-looking parameters: weights around 1, biases around 0
        for n, p in m.named_parameters():
            if n.endswith("weight") and p.dim() == 1:
                p.copy_(1 + 0.1 * torch.randn_like(p))
            elif n.endswith("bias") and "ln" in n:
                p.copy_(0.1 * torch.randn_like(p))
    return m


def inputs():
    """Hidden states of a small batch: what the conversions are compared on."""
    g = torch.Generator().manual_seed(1)
    return (torch.randn(2, SEQ, HIDDEN, generator=g),)


def offset_inputs(offset=100.0):
    """The same with a common offset on every fourth row (kappa about 100, as after a bias-heavy embedding): where a
    one-pass variance cancels. torch 1.13's own f32 LayerNorm is over lnorm's default budget there too, by up to 2x
    (docs/python.md "What lnorm finds in torch"); the one-pass kernel by 100x."""
    (x,) = inputs()
    x[:, ::4] += offset
    return (x,)


def with_eps(m, eps):
    m = copy.deepcopy(m)
    for mod in m.modules():
        if isinstance(mod, nn.LayerNorm):
            mod.eps = eps
    return m


def with_wide_first_norm(m):
    """blocks.0.ln over (SEQ, HIDDEN), its (HIDDEN,) parameters broadcast to (SEQ, HIDDEN)."""
    m = copy.deepcopy(m)
    old = m.blocks[0].ln
    wide = nn.LayerNorm((SEQ, HIDDEN), eps=old.eps)
    with torch.no_grad():
        wide.weight.copy_(old.weight.expand(SEQ, HIDDEN))
        wide.bias.copy_(old.bias.expand(SEQ, HIDDEN))
    m.blocks[0].ln = wide
    return m


def without_final_weight(m):
    m = copy.deepcopy(m)
    m.norm = PlainRMSNorm(m.norm.variance_epsilon)
    return m


def in_bf16(m):
    return copy.deepcopy(m).to(torch.bfloat16)


def with_one_pass_first_norm(m):
    m = copy.deepcopy(m)
    old = m.blocks[0].ln
    fused = OnePassLayerNorm(HIDDEN, old.eps)
    with torch.no_grad():
        fused.weight.copy_(old.weight)
        fused.bias.copy_(old.bias)
    m.blocks[0].ln = fused
    return m


CONVERSIONS = {
    "eps": lambda m: with_eps(m, 1e-6),
    "shape": with_wide_first_norm,
    "affine": without_final_weight,
    "bf16": in_bf16,
    "fused": with_one_pass_first_norm,
}


if __name__ == "__main__":
    import lnorm.torch

    base = model()
    print(lnorm.torch.audit(base, *inputs()))
    print("\n==== offset rows: torch's LayerNorm, then the one-pass replacement")
    print(lnorm.torch.audit(base, *offset_inputs()))
    print(lnorm.torch.audit(with_one_pass_first_norm(base), *offset_inputs()))
    for name, convert in CONVERSIONS.items():
        print(f"\n==== conversion: {name}")
        c = lnorm.torch.compare(base, convert(base), *inputs())
        print(f"{len(c.changed)} of {len(c.diffs)} norms differ:")
        for d in c.changed:
            print(f"  {d}")
