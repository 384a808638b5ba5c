"""lnorm from Python: the exact LayerNorm and RMSNorm reference, the accuracy gate of ``lnorm check`` and
the property suite of ``lnorm verify`` with a Python callable as the kernel, on NumPy arrays.

    import lnorm
    y, mean, rstd = lnorm.reference(x)                  # exact, rounded once
    y, rstd = lnorm.reference(x, g, op="rmsnorm", gamma_offset=1.0)   # Gemma's (1 + w)
    lnorm.assert_layernorm_close(x, my_layernorm(x))    # pytest: fails with the CLI's verdict
    print(lnorm.verify(my_kernel, dtypes=("f32", "bf16")))  # LayerNorm's properties, the CLI's table
    print(lnorm.verify(my_rmsnorm, op="rmsnorm"))       # RMSNorm's own
    dx, dgamma, dbeta = lnorm.reference_backward(x, dy, g)   # the exact gradients
    q, s = lnorm.reference(x, g, op="rmsnorm", quant="fp8_e4m3", scaling="row")   # exact FP8, per-row scales
    print(lnorm.check(x, q, g, op="rmsnorm", quant="fp8_e4m3", scaling="row", scales=s))   # check --quant
    print(lnorm.verify(my_backward, dir="bwd"))         # the backward's laws: fn(x, dy, g, b, eps) -> grads
    lnorm.verify(lnorm.torch_kernel(F.layer_norm, dir="bwd"), dir="bwd")   # torch's, through autograd

bf16 data travels as uint16 bit patterns with dtype="bf16" (a torch bf16 tensor t:
``t.view(torch.int16).numpy().view(numpy.uint16)``; CPU torch tensors are also taken directly).
Contiguous inputs are read in place; non-contiguous or byte-swapped ones are copied first.
README.md "Python" has the details.
"""

from ._lnorm import (AFFINE_KINDS, BACKWARD_PROPERTIES, EDGE_EPS, EDGE_WIDTHS, OPS, PROPERTIES, PROPERTIES_OF,
                     QUANT_FORMATS, RMSNORM_BACKWARD_PROPERTIES, RMSNORM_PROPERTIES, ROW_CLASSES, SCALINGS)
from ._cases import Case, case, cases
from ._asserts import (assert_add_norm_close, assert_backward_close, assert_layernorm_close, assert_quantized_close,
                       assert_rmsnorm_close)
from ._check import CheckResult, check, reference
from ._backward import BackwardCheckResult, check_backward, reference_backward
from ._kernels import Kernel, kernels, run
from ._quant import QuantCheckResult, decode, decode_e8m0
from ._torch import torch_kernel
from ._verify import Outcome, VerifyResult, verify

__all__ = [
    "AFFINE_KINDS", "BACKWARD_PROPERTIES", "OPS", "PROPERTIES_OF", "RMSNORM_BACKWARD_PROPERTIES", "EDGE_EPS", "EDGE_WIDTHS", "PROPERTIES", "RMSNORM_PROPERTIES", "ROW_CLASSES",
    "QUANT_FORMATS", "SCALINGS",
    "Case", "case", "cases", "CheckResult", "assert_layernorm_close", "assert_rmsnorm_close", "assert_add_norm_close",
    "assert_backward_close", "assert_quantized_close", "check", "reference",
    "Kernel", "kernels", "run", "torch_kernel", "Outcome", "VerifyResult", "verify",
    "BackwardCheckResult", "check_backward", "reference_backward", "QuantCheckResult", "decode", "decode_e8m0",
]


def __getattr__(name):
    # lnorm.strategies needs Hypothesis and lnorm.torch needs torch: imported on first use, so `import lnorm` does not.
    if name in ("strategies", "torch"):
        import importlib

        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module 'lnorm' has no attribute {name!r}")
