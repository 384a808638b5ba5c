"""lnorm.reference, lnorm.check, assert_layernorm_close, lnorm.kernels and lnorm.run: specifications."""

import numpy as np
import pytest

import lnorm


def offset_rows(rows=4, cols=33, kappa=1e4, seed=0):
    return lnorm.case("offset", shape=(rows, cols), kappa=kappa, seed=seed).x


def test_reference_is_exact_so_check_finds_zero_error_and_every_element_correctly_rounded():
    x = np.random.default_rng(1).standard_normal((5, 17)).astype(np.float32)
    y, mean, rstd = lnorm.reference(x)
    # Rounded once, so within half an ulp of the real answer, and bit-identical to it rounded.
    r = lnorm.check(x, y, max_ulp=0.5, max_ulp_per_kappa=0, mean=mean, rstd=rstd, max_mean_ulp=0, max_rstd_ulp=0)
    assert r and r.passed
    assert 0 < r.max_ulp <= 0.5 and r.correctly_rounded == 1.0 and r.nonfinite_mismatches == 0
    assert r.mean["max_ulp"] == 0 and r.rstd["max_ulp"] == 0


def test_reference_shapes_follow_onnx_axis_and_dtypes_follow_x():
    x = np.ones((2, 3, 4), np.float16) * np.arange(4, dtype=np.float16)
    y, mean, rstd = lnorm.reference(x, axis=1)
    assert y.shape == x.shape and y.dtype == np.float16
    assert mean.shape == (2, 1, 1) and mean.dtype == np.float32 and rstd.shape == (2, 1, 1)
    y64, mean64, _ = lnorm.reference(x.astype(np.float64), axis=-1)
    assert mean64.shape == (2, 3, 1) and mean64.dtype == np.float64


def test_reference_matches_a_float64_formula_on_plain_data():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 64)).astype(np.float32)
    g = rng.standard_normal(64).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    y, _, _ = lnorm.reference(x, g, b, eps=1e-5)
    x64 = x.astype(np.float64)
    m = x64.mean(-1, keepdims=True)
    want = (x64 - m) / np.sqrt(((x64 - m) ** 2).mean(-1, keepdims=True) + np.float64(np.float32(1e-5))) * g + b
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)


def test_check_names_the_worst_element_as_an_index_into_x_shape():
    x = offset_rows(rows=6, cols=10).reshape(2, 3, 10)
    y, _, _ = lnorm.reference(x)
    bad = y.copy()
    bad[1, 2, 7] += np.float32(0.25)  # about 2^21 ulps: far over 8 + kappa
    r = lnorm.check(x, bad)
    assert not r
    assert r.max_ulp_index == (1, 2, 7)
    assert r.over_budget == 1 and r.elements == 60
    assert r.max_ulp_got == pytest.approx(float(bad[1, 2, 7])) and r.max_ulp_exact == pytest.approx(float(y[1, 2, 7]), rel=2**-23)
    assert r.max_ulp_kappa > 1


def test_check_counts_nan_where_the_answer_is_finite_as_a_nonfinite_mismatch_and_max_ulp_is_inf():
    x = np.random.default_rng(3).standard_normal((4, 8)).astype(np.float32)
    y, _, _ = lnorm.reference(x)
    y[2, 5] = np.nan
    r = lnorm.check(x, y)
    assert not r and r.nonfinite_mismatches == 1 and r.first_nonfinite_mismatch_index == (2, 5)
    assert r.max_ulp == float("inf") and r.max_ulp_nonfinite and r.max_ulp_index == (2, 5)
    assert r.max_finite_ulp <= 0.5
    assert "non-finite mismatches 1" in str(r)
    with pytest.warns(DeprecationWarning):
        assert r.nan_mismatches == 1  # the old name, for one release


def test_check_counts_inf_on_subnormal_rows_where_the_answer_is_finite_never_as_zero_ulp():
    # An earlier engine's bug: ±Inf on rows of subnormal values with eps = 0, where the exact answer is finite.
    k = np.arange(64, dtype=np.float32) - 31
    x = np.stack([k * np.float32(2.0**-140)] * 4 + [k * np.float32(0.25) + 1] * 4)
    y, _, _ = lnorm.reference(x, eps=0)
    assert np.isfinite(y).all()
    bad = y.copy()
    bad[:4] = np.where(y[:4] < 0, -np.inf, np.inf)
    r = lnorm.check(x, bad, eps=0, max_ulp=1e30)
    assert not r
    assert r.nonfinite_mismatches == 4 * 64
    assert r.max_ulp == float("inf") and r.max_ulp_nonfinite and r.max_ulp_index == (0, 0)
    assert r.correctly_rounded == 0.5
    assert str(r).startswith("FAIL  y max inf scaled ulp")


def test_check_measures_the_mean_as_verify_does_in_ulps_of_the_rows_spread():
    # Exact mean 0, std 1: a mean 1e-7 off is 1e-7 / 2^-23 = 0.84 ulp (plain ulps would say 8.7e8).
    x = np.array([[-1, 1]], np.float32)
    y, _, rstd = lnorm.reference(x, eps=0)
    mean = np.array([[1e-7]], np.float32)
    r = lnorm.check(x, y, eps=0, mean=mean, rstd=rstd, max_mean_ulp=8)
    assert r and r.mean["max_ulp"] == pytest.approx(float(mean[0, 0]) / 2.0**-23)
    assert r.mean["metric"] == "ulps of max(|mean|, sqrt(var + eps))"
    assert not lnorm.check(x, y, eps=0, mean=mean, max_mean_ulp=0.5)


def test_assert_layernorm_close_raises_with_the_verdict_and_returns_the_result_when_within_budget():
    x = offset_rows()
    y, _, _ = lnorm.reference(x)
    assert lnorm.assert_layernorm_close(x, y).passed
    with pytest.raises(AssertionError) as e:
        lnorm.assert_layernorm_close(x, np.zeros_like(y))
    msg = str(e.value)
    assert "FAIL  y max" in msg and "worst y   (" in msg and "over budget" in msg


def test_bf16_travels_as_uint16_bits_with_dtype_bf16():
    f = np.random.default_rng(4).standard_normal((3, 16)).astype(np.float32)
    bits = (f.view(np.uint32) >> 16).astype(np.uint16)  # truncation: some bf16 values
    y, mean, rstd = lnorm.reference(bits, dtype="bf16")
    assert y.dtype == np.uint16 and mean.dtype == np.float32
    assert lnorm.check(bits, y, dtype="bf16", max_ulp=0.5, max_ulp_per_kappa=0).correctly_rounded == 1.0
    # bf16 is f32's top half: the answer read back as f32 is close to a float64 formula.
    yf = (y.astype(np.uint32) << 16).view(np.float32)
    xf = (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    want = (xf - xf.mean(-1, keepdims=True)) / np.sqrt(xf.var(-1, keepdims=True) + np.float32(1e-5))
    np.testing.assert_allclose(yf, want, rtol=2**-7, atol=2**-7)


def test_torch_tensors_are_taken_directly_bf16_included():
    torch = pytest.importorskip("torch", reason="python3-torch is not installed")
    t = torch.randn(4, 32)
    y = torch.nn.functional.layer_norm(t, (32,))
    assert lnorm.check(t, y)
    tb = t.to(torch.bfloat16)
    yb = torch.nn.functional.layer_norm(tb, (32,))
    r = lnorm.check(tb, yb)  # dtype bf16 implied by the tensor
    assert r.dtype == "bf16" and r.elements == 128
    bits = tb.view(torch.int16).numpy().view(np.uint16)  # the documented view trick
    assert np.array_equal(lnorm.reference(tb)[0], lnorm.reference(bits, dtype="bf16")[0])


def test_non_contiguous_and_read_only_inputs_give_the_same_answer_as_contiguous_ones():
    base = np.random.default_rng(5).standard_normal((8, 40)).astype(np.float32)
    strided = base[::2, ::2]
    assert not strided.flags.c_contiguous
    want = lnorm.reference(np.ascontiguousarray(strided))
    got = lnorm.reference(strided)
    for a, b in zip(got, want):
        assert np.array_equal(a, b)
    ro = np.ascontiguousarray(strided)
    ro.flags.writeable = False
    assert np.array_equal(lnorm.reference(ro)[0], want[0])
    assert lnorm.check(ro, want[0])
    swapped = np.ascontiguousarray(strided).astype(">f4")
    assert np.array_equal(lnorm.reference(swapped)[0], want[0])


def test_check_reads_contiguous_inputs_in_place_and_copies_only_the_others():
    # NumPy reports its allocations to tracemalloc: checking a contiguous 8 MiB x allocates no array;
    # a Fortran-ordered one (the control) is copied to C order first, and that copy shows.
    import tracemalloc

    x = np.ones((1024, 2048), np.float32)  # 8 MiB
    x[:, ::3] = 2
    y = lnorm.run("welford", x)[0]
    f = np.asfortranarray(x)

    def peak_allocated(a):
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            assert lnorm.check(a, y, threads=2)
            return (tracemalloc.get_traced_memory()[1] - base) / 2**20
        finally:
            tracemalloc.stop()

    contiguous, fortran = peak_allocated(x), peak_allocated(f)
    assert contiguous < 1, f"checking a contiguous 8 MiB x allocated {contiguous:.1f} MiB"
    assert fortran >= 7.9, f"the control: a Fortran-ordered x must be copied (8 MiB), allocated {fortran:.1f} MiB"


def test_kernels_lists_the_registry_and_run_agrees_with_the_reference_within_budget():
    ks = lnorm.kernels()
    names = [k.name for k in ks]
    assert "naive" in names and "welford" in names
    onepass = next(k for k in ks if k.name == "onepass")
    assert onepass.cautionary
    x = offset_rows(kappa=1e3)
    y, mean, rstd = lnorm.run("welford", x)
    assert lnorm.check(x, y, mean=mean, rstd=rstd)
    assert mean.shape == (4, 1)


def test_run_refuses_unknown_kernels_and_unsupported_dtypes():
    x = np.zeros((2, 8), np.float32)
    with pytest.raises(ValueError, match="no kernel named 'nope'"):
        lnorm.run("nope", x)


def test_the_gil_is_released_while_check_works():
    # A polling thread wakes every millisecond and notes the longest time between two of its wake-ups.
    # Were the GIL held through the C++ work, the thread could not run from the first wake-up after the
    # check began until the check returned: the gap would span the whole check. Released, the gap stays
    # at scheduling noise. The thread sleeps rather than spins: a sleeper is woken at once by the kernel's
    # scheduler even when every core is busy (ctest -j runs other tests beside this one), where a spinner
    # competes for a time slice; CI once saw a spinner stalled 93 ms of a 176 ms check with the GIL released.
    import threading
    import time

    x = np.random.default_rng(6).standard_normal((512, 2048), dtype=np.float32)
    y = lnorm.run("welford", x)[0]
    stop, gap = threading.Event(), [0.0]

    def poll():
        last = time.perf_counter()
        while not stop.is_set():
            time.sleep(0.001)
            now = time.perf_counter()
            gap[0], last = max(gap[0], now - last), now

    t = threading.Thread(target=poll)
    t.start()
    time.sleep(0.05)
    start = time.perf_counter()
    lnorm.check(x, y, threads=1)
    duration = time.perf_counter() - start
    stop.set()
    t.join()
    assert gap[0] < duration / 2, f"the other thread was stalled {gap[0]:.3f} s of a {duration:.3f} s check"


def test_rmsnorm_reference_and_check_with_gemmas_offset_and_f32_weights_beside_bf16_x():
    rng = np.random.default_rng(7)
    f = rng.standard_normal((4, 64)).astype(np.float32)
    x = (f.view(np.uint32) >> 16).astype(np.uint16)  # bf16 bits
    w = (0.1 * rng.standard_normal(64)).astype(np.float32)  # zero-centred, kept in f32
    y, rstd = lnorm.reference(x, w, op="rmsnorm", gamma_offset=1.0, dtype="bf16")
    assert y.dtype == np.uint16 and rstd.dtype == np.float32 and rstd.shape == (4, 1)
    r = lnorm.check(x, y, w, op="rmsnorm", gamma_offset=1.0, dtype="bf16", rstd=rstd, max_ulp=0.5, max_ulp_per_kappa=0)
    assert r and r.correctly_rounded == 1.0 and r.op == "rmsnorm" and r.param_dtype == "f32" and r.gamma_offset == 1.0
    # A float64 evaluation of the same formula agrees to bf16's precision.
    xf = (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    want = xf / np.sqrt((xf * xf).mean(-1, keepdims=True) + np.float32(1e-5)) * (1.0 + w)
    got = (y.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_allclose(got, want, rtol=2**-8)
    # Forgetting the offset is caught.
    assert not lnorm.check(x, y, w, op="rmsnorm", dtype="bf16", max_ulp_per_kappa=0)
    with pytest.raises(ValueError, match="rmsnorm has no mean output"):
        lnorm.check(x, y, w, op="rmsnorm", gamma_offset=1.0, dtype="bf16", mean=rstd)
    with pytest.raises(ValueError, match="gamma_offset needs gamma"):
        lnorm.reference(x, op="rmsnorm", gamma_offset=1.0, dtype="bf16")
    lnorm.assert_rmsnorm_close(x, y, w, gamma_offset=1.0, dtype="bf16")


def test_check_with_a_recipe_reports_both_distances_and_refuses_recipes_that_do_not_apply():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 64)).astype(np.float32)
    w = (1 + 0.1 * rng.standard_normal(64)).astype(np.float32)
    y, _ = lnorm.reference(x, w, op="rmsnorm", eps=1e-6)
    r = lnorm.check(x, y, w, op="rmsnorm", eps=1e-6, recipe="llama")
    assert r.recipe["name"] == "llama" and r.recipe["budget"] == 0.5
    # f32 data: the llama cast rounds z* to f32, so the exact answer is within about an ulp of the recipe.
    assert r.recipe["max_ulp"] <= 1.5 and r.max_ulp <= 0.5
    assert lnorm.check(x, y, w, op="rmsnorm", eps=1e-6).recipe is None
    assert "from the llama recipe" in str(r)
    with pytest.raises(ValueError, match="llama is an RMSNorm recipe"):
        lnorm.check(x, y, w, eps=1e-6, recipe="llama")
    with pytest.raises(ValueError, match="unknown recipe"):
        lnorm.check(x, y, w, op="rmsnorm", eps=1e-6, recipe="mistral")


def test_add_and_norm_reference_run_and_check_take_a_residual_and_return_or_gate_h():
    rng = np.random.default_rng(7)
    # |x| ~ |residual| ~ 1e4 with a sum ~ 1: the cancelling case of Add & Norm.
    x = (1e4 * rng.standard_normal((8, 64))).astype(np.float32)
    r = (-x + rng.standard_normal((8, 64))).astype(np.float32)
    g = rng.standard_normal(64).astype(np.float32)
    y, rstd, h = lnorm.reference(x, g, op="rmsnorm", residual=r)   # op becomes add_rmsnorm; h appended
    assert h.dtype == np.float32 and h.shape == x.shape
    assert np.array_equal(h, x + r)          # one f32 addition is the exact sum rounded once
    y_plain, _ = lnorm.reference(h, g, op="rmsnorm")
    assert np.array_equal(y, y_plain)        # y is the norm of h as stored
    res = lnorm.check(x, y, g, op="rmsnorm", residual=r, h=h)
    assert res and res.op == "add_rmsnorm" and res.h["max_ulp"] == 0 and res.h["correctly_rounded"] == 1.0
    assert "h max 0 ulp" in str(res) and res.residual_dtype == "f32"
    bad = h.copy()
    bad[3, 5] = np.nextafter(bad[3, 5], np.float32(np.inf))
    worse = lnorm.check(x, y, g, op="rmsnorm", residual=r, h=bad)
    assert not worse and worse.y_pass and worse.h["over_budget"] == 1 and worse.h["max_ulp_index"] == (3, 5)
    assert lnorm.check(x, y, g, op="rmsnorm", residual=r, h=bad, max_h_ulp=1.5)
    # A built-in kernel through lnorm.run, 16-bit x with an f32 residual stream (residual_in_fp32).
    y2, mean2, rstd2, h2 = lnorm.run("welford", x.astype(np.float16), residual=r)
    assert h2.dtype == np.float32 and y2.dtype == np.float16
    assert lnorm.check(x.astype(np.float16), y2, residual=r, h=h2, max_ulp=1)
    with pytest.raises(ValueError, match="needs residual="):
        lnorm.check(x, y, g, op="rmsnorm", h=h)
    with pytest.raises(ValueError, match="give residual="):
        lnorm.reference(x, op="add_layernorm")
    with pytest.raises(TypeError, match="residual holds float64"):
        lnorm.reference(x, residual=r.astype(np.float64))
    with pytest.raises(ValueError, match="residual has shape"):
        lnorm.reference(x, residual=r[:4])


def test_reference_backward_and_check_backward_agree_with_the_cli_semantics():
    rng = np.random.default_rng(11)
    x = (2 + rng.standard_normal((5, 3, 8))).astype(np.float32)
    dy = rng.standard_normal((5, 3, 8)).astype(np.float32)
    g = (1 + 0.2 * rng.standard_normal((3, 8))).astype(np.float32)
    dx, dg, db = lnorm.reference_backward(x, dy, g, axis=1)
    assert dx.shape == x.shape and dg.shape == (3, 8) and db.shape == (3, 8) and dg.dtype == np.float32
    assert np.array_equal(db, dy.sum(axis=0, dtype=np.float64).astype(np.float32))  # Σ dy, rounded once
    r = lnorm.check_backward(x, dy, g, dx=dx, dgamma=dg, dbeta=db, axis=1, max_ulp=0.5)
    assert r and r.dx["correctly_rounded"] == 1.0 and r.dgamma["correctly_rounded"] == 1.0
    assert "dx max" in str(r) and r.dgamma_undecided == 0
    bad = dx.copy()
    bad[2, 1, 3] *= 1.001
    r = lnorm.check_backward(x, dy, g, dx=bad, axis=1)
    assert not r and r.dx["max_ulp_index"] == (2, 1, 3) and r.dgamma is None
    # RMSNorm, bf16 through torch tensors, and the refusals.
    dxr, dgr, dbr = lnorm.reference_backward(x, dy, op="rmsnorm")
    assert dgr.shape == (8,)
    with pytest.raises(ValueError, match="give at least one"):
        lnorm.check_backward(x, dy)
    with pytest.raises(ValueError, match="dy has shape"):
        lnorm.reference_backward(x, dy[:2])
    with pytest.raises(ValueError, match="needs dgamma="):
        lnorm.check_backward(x, dy, dx=dx, max_dgamma_ulp=1)


def test_verify_refuses_add_and_norm_and_says_where_it_is():
    with pytest.raises(ValueError, match="lnorm.verify takes 'layernorm' or 'rmsnorm'"):
        lnorm.verify(lambda x, g, b, eps: x, op="add_rmsnorm")
