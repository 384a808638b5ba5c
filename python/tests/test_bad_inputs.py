"""Bad input is a Python exception naming what is wrong: never a crash, never a silent conversion."""

import numpy as np
import pytest

import lnorm

X = np.zeros((3, 8), np.float32)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: lnorm.reference([[1.0, 2.0]]), TypeError, "expected a NumPy array"),
        (lambda: lnorm.reference(np.zeros((2, 4), np.int32)), TypeError, "int32"),
        (lambda: lnorm.reference(np.zeros((2, 4), np.uint16)), TypeError, "dtype='bf16'"),
        (lambda: lnorm.reference(X, dtype="f16"), TypeError, "needs float16"),
        (lambda: lnorm.reference(X, dtype="f8"), ValueError, "expected 'f32'"),
        (lambda: lnorm.reference(np.array(1.0, np.float32)), ValueError, "0-d"),
        (lambda: lnorm.reference(np.zeros((3, 0), np.float32)), ValueError, "zero width"),
        (lambda: lnorm.reference(X, axis=2), ValueError, "axis 2 is out of range"),
        (lambda: lnorm.reference(X, axis=-3), ValueError, "out of range"),
        (lambda: lnorm.reference(X, eps=-1), ValueError, "eps"),
        (lambda: lnorm.reference(X, eps=float("nan")), ValueError, "eps"),
        (lambda: lnorm.reference(X, np.ones(7, np.float32)), ValueError, "gamma has shape"),
        (lambda: lnorm.reference(X, None, np.ones(8, np.float64)), TypeError, "beta holds float64"),
        (lambda: lnorm.reference(X, threads=0), ValueError, "threads"),
        (lambda: lnorm.check(X, np.zeros((3, 9), np.float32)), ValueError, "y has shape"),
        (lambda: lnorm.check(X, np.zeros((3, 8), np.float64)), TypeError, "y holds float64"),
        (lambda: lnorm.check(X, X, mean=np.zeros(4, np.float32)), ValueError, "one value per row"),
        (lambda: lnorm.check(X, X, rstd=np.zeros(3, np.float64)), TypeError, "rstd holds float64"),
        (lambda: lnorm.check(X, X, max_ulp=-1), ValueError, "max_ulp"),
        (lambda: lnorm.check(X, "y"), TypeError, "expected a NumPy array"),
        (lambda: lnorm.run("welford", X, axis=5), ValueError, "out of range"),
        (lambda: lnorm.verify(42), TypeError, "callable"),
        (lambda: lnorm.verify(lambda *a: None, dtypes=("f33",)), ValueError, "f33"),
        (lambda: lnorm.verify(lambda *a: None, properties=("speed",)), ValueError, "not a property"),
        (lambda: lnorm.verify(lambda *a: None, budget={"y": {"a": 1}}), ValueError, "reason"),
        (lambda: lnorm.verify(lambda *a: None, budget={"yy": {"a": 1}}), ValueError, "unknown key"),
        (lambda: lnorm.verify(lambda *a: None, budget="[x.f32]\ny = 3"), ValueError, "budget"),
        (lambda: lnorm.case("medium"), ValueError, "not one of"),
        (lambda: lnorm.case("normal", shape=(0, 4)), ValueError, ">= 1"),
    ],
)
def test_bad_input_raises_a_python_exception_naming_it(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_a_tensor_off_the_host_is_refused_with_how_to_fix_it():
    torch = pytest.importorskip("torch", reason="python3-torch is not installed")
    # A meta tensor has no host memory, like a CUDA one, and exists on every machine.
    with pytest.raises(TypeError, match=r"x\.cpu\(\)"):
        lnorm.reference(torch.zeros(2, 4, device="meta"))
