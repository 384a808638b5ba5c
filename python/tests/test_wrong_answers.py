"""Known wrong answers: each FAILS lnorm.check / lnorm.check_backward with the default budget, and beside
each, right answers that PASS (the exact answer, which is correctly rounded, and a faithful f32 computation rounded
once to the 16-bit format). Before the allowance model of docs/verify.md "How error is measured", every wrong one
passed: the error of a 16-bit output was counted in ulps of the 16-bit format (bf16: 2^16 f32 ulps each), and
LayerNorm's scale was floored at 1 on rows with var << eps. tests/test_cli_wrong_answers.cpp holds the CLI's twin."""

import numpy as np
import pytest

import lnorm

DTYPES = ("bf16", "f16")


def to16(dt, a):
    """float32 -> bf16 bit patterns (nearest even) or float16."""
    a = np.asarray(a, np.float32)
    if dt == "f16":
        return a.astype(np.float16)
    u = a.view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def from16(dt, a):
    return a.astype(np.float32) if dt == "f16" else (a.astype(np.uint32) << 16).view(np.float32)


def kw(dt):
    return {"dtype": "bf16"} if dt == "bf16" else {}


def layernorm_f32(x, g, b, eps, ddof=0):
    """The textbook two-pass LayerNorm in f32 arithmetic (variance over n - ddof)."""
    x = x.astype(np.float32)
    m = x.mean(-1, keepdims=True, dtype=np.float32)
    v = ((x - m) ** 2).sum(-1, keepdims=True, dtype=np.float32) / np.float32(x.shape[-1] - ddof)
    y = (x - m) / np.sqrt(v + np.float32(eps))
    if g is not None:
        y = y * g
    if b is not None:
        y = y + b
    return y.astype(np.float32)


@pytest.fixture(params=[(dt, cols) for dt in DTYPES for cols in (256, 32)], ids=lambda p: f"{p[0]}-{p[1]}")
def forward16(request):
    dt, cols = request.param
    rng = np.random.default_rng(51 + cols)
    x = to16(dt, rng.standard_normal((64, cols)))
    g = to16(dt, 1 + 0.1 * rng.standard_normal(cols))
    b = to16(dt, 0.03 * rng.standard_normal(cols))  # beta of about 0.03, where beta twice hid
    f32 = layernorm_f32(from16(dt, x), from16(dt, g), from16(dt, b), 1e-5)
    return dt, x, g, b, f32


def test_16bit_forward_right_answers_pass(forward16):
    dt, x, g, b, f32 = forward16
    y, _, _ = lnorm.reference(x, g, b, **kw(dt))
    exact = lnorm.check(x, y, g, b, **kw(dt))
    assert exact and exact.max_ulp == 0 and exact.correctly_rounded == 1.0, str(exact)
    faithful = lnorm.check(x, to16(dt, f32), g, b, **kw(dt))
    assert faithful and faithful.max_ulp < 8 and faithful.bias["pass"], str(faithful)


@pytest.mark.parametrize("wrong", ["beta twice", "+0.006", "var over n-1"])
def test_16bit_forward_systematic_errors_fail(forward16, wrong):
    dt, x, g, b, f32 = forward16
    xf, gf, bf = from16(dt, x), from16(dt, g), from16(dt, b)
    y = {"beta twice": lambda: f32 + bf, "+0.006": lambda: f32 + np.float32(0.006),
         "var over n-1": lambda: layernorm_f32(xf, gf, bf, 1e-5, ddof=1)}[wrong]()
    r = lnorm.check(x, to16(dt, y), g, b, **kw(dt))
    assert not r, str(r)
    # The text names the element over its allowance, and that element is over it.
    w = r.worst_over_budget
    assert r.over_budget > 0 and w["error"] > w["allowed"]
    assert "over      y" in str(r)


@pytest.fixture(scope="module")
def tiny_rows():
    """Rows far below eps: x = 3e-10 N(0, 1), eps 1e-5, so |y*| <= ~4e-7."""
    x = (3e-10 * np.random.default_rng(3).standard_normal((64, 256))).astype(np.float32)
    y, _, _ = lnorm.reference(x, eps=1e-5)
    return x, y


def test_rows_below_eps_right_answers_pass(tiny_rows):
    x, y = tiny_rows
    assert np.abs(y).max() < 1e-6
    assert lnorm.check(x, y, eps=1e-5)
    r = lnorm.check(x, layernorm_f32(x, None, None, 1e-5), eps=1e-5)
    assert r and r.max_ulp < 8, str(r)


@pytest.mark.parametrize("wrong", ["negated", "zeros", "eps 1e-6"])
def test_rows_below_eps_wrong_answers_fail(tiny_rows, wrong):
    x, y = tiny_rows
    cand = {"negated": lambda: -y, "zeros": lambda: np.zeros_like(y),
            "eps 1e-6": lambda: layernorm_f32(x, None, None, 1e-6)}[wrong]()
    r = lnorm.check(x, cand, eps=1e-5)
    assert not r and r.max_ulp > 1e3, str(r)


def backward_f32(x, dy, g, eps, drop_mean_g=False):
    """LayerNorm's backward in f32 arithmetic; dgamma and dbeta summed in f64 and rounded to f32 (one rounding,
    as the SIMD kernels do)."""
    m = x.mean(-1, keepdims=True, dtype=np.float32)
    r = np.float32(1) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True, dtype=np.float32) + np.float32(eps))
    xh = (x - m) * r
    gg = dy * g
    mg = np.float32(0) if drop_mean_g else gg.mean(-1, keepdims=True, dtype=np.float32)
    dx = r * (gg - mg - xh * (gg * xh).mean(-1, keepdims=True, dtype=np.float32))
    dgamma = (dy.astype(np.float64) * xh).sum(0).astype(np.float32)
    dbeta = dy.astype(np.float64).sum(0).astype(np.float32)
    return dx.astype(np.float32), dgamma, dbeta, xh


@pytest.fixture(scope="module", params=DTYPES)
def backward16(request):
    """2048 x 64 with 16-bit gamma: |dbeta| grows like sqrt(rows) (here ~45), and the old allowance like rows (bf16:
    ~0.05 x 2048 = 100, so zeros passed; the case first found had 8192 rows)."""
    dt = request.param
    rng = np.random.default_rng(24)
    x, dy = to16(dt, rng.standard_normal((2048, 64))), to16(dt, rng.standard_normal((2048, 64)))
    g = to16(dt, 1 + 0.1 * rng.standard_normal(64))
    return dt, x, dy, g, backward_f32(from16(dt, x), from16(dt, dy), from16(dt, g), 1e-5)


def test_16bit_parameter_gradients_right_answers_pass(backward16):
    dt, x, dy, g, (dx, dgamma, dbeta, _) = backward16
    edx, edg, edb = lnorm.reference_backward(x, dy, g, **kw(dt))
    exact = lnorm.check_backward(x, dy, g, dx=edx, dgamma=edg, dbeta=edb, **kw(dt))
    assert exact and exact.dbeta["correctly_rounded"] == 1.0, str(exact)
    faithful = lnorm.check_backward(x, dy, g, dx=to16(dt, dx), dgamma=to16(dt, dgamma), dbeta=to16(dt, dbeta), **kw(dt))
    assert faithful, str(faithful)


@pytest.mark.parametrize("wrong", ["dbeta zeros", "dgamma zeros", "dbeta over half the rows",
                                   "dbeta without the last 64 rows", "dbeta summed in 16 bits",
                                   "dgamma summed in 16 bits"])
def test_16bit_parameter_gradients_wrong_answers_fail(backward16, wrong):
    dt, x, dy, g, (_, dgamma, dbeta, xh) = backward16
    dyf = from16(dt, dy)
    zeros = to16(dt, np.zeros(64, np.float32))

    def summed16(terms):
        acc = np.zeros(64, np.float32)
        for row in terms:
            acc = from16(dt, to16(dt, acc + row))
        return to16(dt, acc)

    which, cand = {
        "dbeta zeros": lambda: ("dbeta", zeros),
        "dgamma zeros": lambda: ("dgamma", zeros),
        "dbeta over half the rows": lambda: ("dbeta", to16(dt, dyf[:1024].astype(np.float64).sum(0))),
        "dbeta without the last 64 rows": lambda: ("dbeta", to16(dt, dyf[:-64].astype(np.float64).sum(0))),
        "dbeta summed in 16 bits": lambda: ("dbeta", summed16(dyf)),
        "dgamma summed in 16 bits": lambda: ("dgamma", summed16(dyf * xh)),
    }[wrong]()
    r = lnorm.check_backward(x, dy, g, **{which: cand}, **kw(dt))
    assert not r, str(r)
    s = getattr(r, which)
    assert s["worst_over_budget"]["error"] > s["worst_over_budget"]["allowed"]


@pytest.mark.parametrize("dt", DTYPES)
def test_16bit_dx_without_mean_g_fails_and_its_f32_twin_passes(dt):
    rng = np.random.default_rng(4096)
    x, dy = to16(dt, rng.standard_normal((16, 4096))), to16(dt, rng.standard_normal((16, 4096)))
    g = to16(dt, 1 + 0.1 * rng.standard_normal(4096))
    xf, dyf, gf = from16(dt, x), from16(dt, dy), from16(dt, g)
    right = backward_f32(xf, dyf, gf, 1e-5)[0]
    wrong = backward_f32(xf, dyf, gf, 1e-5, drop_mean_g=True)[0]
    assert lnorm.check_backward(x, dy, g, dx=to16(dt, right), **kw(dt))
    r = lnorm.check_backward(x, dy, g, dx=to16(dt, wrong), **kw(dt))
    assert not r, str(r)


def test_a_bias_below_every_element_budget_fails_by_its_mean():
    """f32: y* + 3 scaled ulps on every element (3 ulps of s = max(1, |z|)) is within 8 + kappa everywhere; the mean
    signed error (about 3) is past its bound (0.5 + 3 x 8 / sqrt(512) = 1.56). The exact answer with its elements one
    step off either way at random passes both."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((512, 64)).astype(np.float32)
    y, _, _ = lnorm.reference(x)
    s = np.maximum(1.0, np.abs(y.astype(np.float64)))
    up = (y + 3 * np.exp2(np.floor(np.log2(s)) - 23)).astype(np.float32)
    r = lnorm.check(x, up)
    assert not r and r.over_budget == 0 and not r.bias["pass"], str(r)
    assert 2 < r.bias["mean_signed_error"] < 3.5 and "a systematic error" in str(r)
    jitter = np.where(rng.random(y.shape) < 0.5, np.nextafter(y, np.float32(-np.inf)), np.nextafter(y, np.float32(np.inf)))
    ok = lnorm.check(x, jitter)
    assert ok and abs(ok.bias["mean_signed_error"]) < 0.5, str(ok)


def test_a_fail_just_over_budget_prints_the_digits_that_show_it():
    """An element at 8.0001 scaled ulps against a budget of 8 must not read "max 8 ... budget 8"."""
    x = np.array([[-1.0, 1.0]], np.float32)  # z = -1, 1 with eps 0: y* = -1, 1 exactly, ulp(1) = 2^-23
    y = np.array([[-1.0, 1.0 + 8.0001 * 2.0 ** -23]], np.float64).astype(np.float32)  # rounds to 1 + 8 ulps
    r = lnorm.check(x, y, eps=0, max_ulp=7.99999, max_ulp_per_kappa=0)
    assert not r
    assert "y max 8 scaled ulp" in str(r) and "budget 7.99999" in str(r)
    assert "8 scaled ulp > allowed 7.99999" in str(r)


def test_a_near_constant_row_computed_as_zero_needs_the_exact_mean_budget():
    """x = 500 + 0..2 of its ulps, eps 1e-5: kappa 1.6e5 and |y*| <= 0.011, below what an f32 mean errs by (u*kappa;
    NumPy's pairwise f32 mean is off by 0.0108 in z). So y = 0 is within the default 8 + 1*kappa (docs/verify.md:
    what the kappa term admits), and fails the budget of a kernel that claims an exact mean, b = 0."""
    rng = np.random.default_rng(5)
    base = np.float32(500)
    x = (base + np.spacing(base) * rng.integers(0, 3, (64, 256))).astype(np.float32)
    y, _, _ = lnorm.reference(x, eps=1e-5)
    assert 0.005 < np.abs(y).max() < 0.02
    zeros = np.zeros_like(y)
    assert lnorm.check(x, zeros, eps=1e-5)  # within u*kappa: what a kernel that rounds its mean may do
    exact_mean = lnorm.check(x, zeros, eps=1e-5, max_ulp_per_kappa=0)
    assert not exact_mean and exact_mean.max_ulp > 1e6, str(exact_mean)
    assert lnorm.check(x, y, eps=1e-5, max_ulp_per_kappa=0)
