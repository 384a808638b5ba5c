"""Torch tensors in and out: CPU tensors become NumPy arrays through ``Tensor.numpy()`` (zero-copy),
bfloat16 tensors through their bit patterns: ``t.view(torch.int16).numpy().view(numpy.uint16)``,
which is how lnorm (like ``lnorm check`` with ``--dtype bf16``) holds bf16 data."""

import numpy as np


def is_torch_tensor(a):
    t = type(a)
    return t.__module__.startswith("torch") and hasattr(a, "numpy") and hasattr(a, "dtype")


def to_numpy(a, what):
    """(array, "bf16" or None): a torch tensor as a NumPy array; anything else unchanged."""
    if not is_torch_tensor(a):
        return a, None
    import torch

    if a.device.type != "cpu":
        raise TypeError(f"{what}: a tensor on {a.device}; lnorm reads host memory: pass {what}.cpu()")
    a = a.detach()
    if a.dtype == torch.bfloat16:
        return a.view(torch.int16).numpy().view(np.uint16), "bf16"
    return a.numpy(), None


def from_numpy(a, dtype):
    """A NumPy array as a torch tensor (zero-copy); uint16 holding bf16 bits becomes a bfloat16 tensor."""
    import torch

    if a is None:
        return None
    if dtype == "bf16":
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def torch_kernel(fn):
    """Wraps fn(x, gamma, beta, eps) written for torch tensors as a kernel lnorm.verify can call:
    the NumPy arrays go in as tensors (bf16 included), the tensors that come out go back as arrays.

        lnorm.verify(lnorm.torch_kernel(
            lambda x, g, b, eps: torch.nn.functional.layer_norm(x, x.shape[-1:], g, b, eps)),
            dtypes=("f32", "bf16"))
    """

    def kernel(x, gamma, beta, eps):
        dtype = "bf16" if x.dtype == np.uint16 else None
        out = fn(from_numpy(x, dtype), from_numpy(gamma, dtype), from_numpy(beta, dtype), eps)
        if isinstance(out, (tuple, list)):
            return tuple(to_numpy(o, "fn's output")[0] for o in out)
        return to_numpy(out, "fn's output")[0]

    kernel.__name__ = getattr(fn, "__name__", "torch_kernel")
    return kernel
