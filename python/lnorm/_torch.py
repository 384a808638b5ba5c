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


def _adapt(fn):
    """fn as fn(x, gamma, beta, eps[, gamma_offset]): torch.nn.functional.layer_norm (and rms_norm, where
    torch has it) take (input, normalized_shape, weight, bias, eps) and are called so, normalizing the
    last dim; any other fn is called as it is."""
    import torch

    name = getattr(fn, "__name__", "")
    layer_norm = fn is torch.nn.functional.layer_norm or (name == "layer_norm" and _first_params(fn)[:2] == ["input", "normalized_shape"])
    rms_norm = getattr(torch.nn.functional, "rms_norm", None)
    if layer_norm:
        return lambda x, g, b, eps: fn(x, x.shape[-1:], g, b, eps)
    if rms_norm is not None and fn is rms_norm:
        return lambda x, g, b, eps: fn(x, x.shape[-1:], g, eps)
    return fn


def _first_params(fn):
    import inspect

    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


def torch_kernel(fn, dir="fwd"):
    """Wraps a torch function as a kernel lnorm.verify can call: the NumPy arrays go in as tensors (bf16
    included), the tensors that come out go back as arrays. fn is either fn(x, gamma, beta, eps[,
    gamma_offset]) written for tensors, or torch.nn.functional.layer_norm itself, which is called with
    normalized_shape = the last dim:

        lnorm.verify(lnorm.torch_kernel(torch.nn.functional.layer_norm), dtypes=("f32", "bf16"))
        lnorm.verify(lnorm.torch_kernel(lambda x, g, b, eps: my_rmsnorm(x, g, eps)), op="rmsnorm")

    dir="bwd": fn is still the forward, and the kernel returns its gradients through autograd: x, gamma
    and beta become leaf tensors that require grad, y = fn(...) (y = the first output of a tuple), then
    y.backward(dy) and (x.grad, gamma.grad, beta.grad):

        lnorm.verify(lnorm.torch_kernel(torch.nn.functional.layer_norm, dir="bwd"), dir="bwd")
    """
    import inspect

    if dir not in ("fwd", "bwd"):
        raise ValueError(f"dir={dir!r}: expected 'fwd' or 'bwd'")
    call = _adapt(fn)
    try:
        takes_offset = "gamma_offset" in inspect.signature(call).parameters
    except (TypeError, ValueError):
        takes_offset = False

    def param_dtype(gamma, beta):
        param = gamma if gamma is not None else beta
        return "bf16" if param is not None and param.dtype == np.uint16 else None

    def run(x, gamma, beta, eps, **kw):
        dtype = "bf16" if x.dtype == np.uint16 else None
        pd = param_dtype(gamma, beta)
        out = call(from_numpy(x, dtype), from_numpy(gamma, pd), from_numpy(beta, pd), eps, **kw)
        if isinstance(out, (tuple, list)):
            return tuple(to_numpy(o, "fn's output")[0] for o in out)
        return to_numpy(out, "fn's output")[0]

    def run_bwd(x, dy, gamma, beta, eps, **kw):
        dtype = "bf16" if x.dtype == np.uint16 else None
        pd = param_dtype(gamma, beta)
        # Fresh leaves (the NumPy buffers are the harness's copies; a clone keeps autograd off them).
        leaf = lambda a, d: None if a is None else from_numpy(a, d).clone().requires_grad_(True)
        xt, gt, bt = leaf(x, dtype), leaf(gamma, pd), leaf(beta, pd)
        y = call(xt, gt, bt, eps, **kw)
        if isinstance(y, (tuple, list)):
            y = y[0]
        y.backward(from_numpy(dy, dtype))
        grad = lambda t: None if t is None or t.grad is None else to_numpy(t.grad, "a gradient")[0]
        return grad(xt), grad(gt), grad(bt)

    body = run_bwd if dir == "bwd" else run
    if takes_offset:
        def kernel(*args, gamma_offset=0.0):
            return body(*args, gamma_offset=gamma_offset)
    else:
        def kernel(*args):
            return body(*args)

    kernel.__name__ = getattr(fn, "__name__", "torch_kernel")
    kernel._lnorm_dir = dir
    return kernel
