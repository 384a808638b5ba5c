"""lnorm.verify with Python callables: a correct kernel passes every property of its op, and every way a
callable can misbehave is that property's failure with its message, while the run goes on."""

import numpy as np
import pytest

import lnorm


def exact_kernel(x, gamma, beta, eps, gamma_offset=0.0):
    y, mean, rstd = lnorm.reference(x, gamma, beta, eps=eps, dtype="bf16" if x.dtype == np.uint16 else None, threads=1,
                                    gamma_offset=gamma_offset)
    return y, mean, rstd


def exact_rmsnorm(x, gamma, beta, eps, gamma_offset=0.0):
    return lnorm.reference(x, gamma, beta, eps=eps, dtype="bf16" if x.dtype == np.uint16 else None, threads=1,
                           op="rmsnorm", gamma_offset=gamma_offset)


def test_the_exact_reference_as_a_callable_passes_every_layernorm_property_f32_and_bf16():
    r = lnorm.verify(exact_kernel, dtypes=("f32", "bf16"), cases=12, f32_params=True)
    assert r, str(r)
    assert len(r.outcomes) == 2 * len(lnorm.PROPERTIES) == 24  # the ten, batch_invariance and params
    assert {o.status for o in r.outcomes} == {"pass"}
    assert "exact_kernel" in r.table and "pass" in r.table


def test_the_exact_rmsnorm_as_a_callable_passes_every_rmsnorm_property():
    r = lnorm.verify(exact_rmsnorm, op="rmsnorm", dtypes=("f32", "bf16"), cases=12, f32_params=True)
    assert r, str(r)
    assert {o.property for o in r.outcomes} == set(lnorm.RMSNORM_PROPERTIES)
    assert {o.op for o in r.outcomes} == {"rmsnorm"} and {o.status for o in r.outcomes} == {"pass"}
    assert "invariance" not in lnorm.RMSNORM_PROPERTIES and "oddness" in lnorm.RMSNORM_PROPERTIES


def test_a_layernorm_verified_as_an_rmsnorm_fails_for_the_right_reason():
    r = lnorm.verify(exact_kernel, op="rmsnorm", properties=("accuracy",), cases=24)
    assert not r
    assert "fn returned a sequence of 3; expected y or (y, rstd) for rmsnorm" in r.outcome("accuracy").message


def test_params_is_skipped_with_its_reason_when_fn_takes_no_offset_and_no_f32_params():
    def plain(x, gamma, beta, eps):
        return exact_kernel(x, gamma, beta, eps)

    r = lnorm.verify(plain, properties=("params",), cases=6)
    o = r.outcome("params")
    assert o.status == "skipped" and "gamma_offset" in o.message
    assert not r and "NOTHING VERIFIED" in str(r)  # every cell skipped: not a pass


def test_a_selection_with_nothing_to_verify_is_refused():
    # A callable writes y: it has no quantized output, so `quantized` has no cell ("NOTHING VERIFIED", truthy, before).
    with pytest.raises(ValueError, match="nothing to verify"):
        lnorm.verify(exact_kernel, properties=("quantized",), dtypes=("f32",), quick=True)


def test_a_signature_the_suite_cannot_call_is_said_once():
    def two_args(x, gamma):
        return x

    with pytest.raises(TypeError, match=r"fn's first call raised TypeError: .*lnorm.verify calls fn\(x, gamma, beta, eps\)"):
        lnorm.verify(two_args)


def test_e_x2_minus_mean2_fails_accuracy_and_the_failure_carries_its_shrunk_case_and_reproduction():
    def e_x2(x, gamma, beta, eps):
        mean = x.mean(-1, keepdims=True, dtype=np.float32)
        var = (x * x).mean(-1, keepdims=True, dtype=np.float32) - mean * mean
        y = (x - mean) / np.sqrt(var + np.float32(eps))
        if gamma is not None:
            y = y * gamma
        if beta is not None:
            y = y + beta
        return y.astype(np.float32)

    with np.errstate(all="ignore"):
        r = lnorm.verify(e_x2, properties=("accuracy",), cases=24)
    assert not r
    o = r.outcome("accuracy")
    assert o.status == "FAIL" and o.failed
    assert o.case is not None and o.case.x.dtype == np.float32 and o.case.x.ndim >= 1
    assert o.reproduce.startswith('lnorm.verify(e_x2, dtypes=("f32", ), properties=("accuracy", ), seed=1')
    assert o.counterexample and o.counterexample in r.table
    # The shrunk case still fails when checked directly.
    with np.errstate(all="ignore"):
        c = o.case
        y = e_x2(c.x.reshape(-1, int(np.prod(c.x.shape[c.axis:]))), *(
            a.reshape(-1) if a is not None else None for a in (c.gamma, c.beta)), c.eps).reshape(c.x.shape)
    assert not lnorm.check(c.x, y, c.gamma, c.beta, axis=c.axis, eps=c.eps)


def test_an_expected_failure_budget_turns_that_failure_into_xfail():
    def no_eps(x, gamma, beta, eps):  # ignores eps: fails eps_edges (var << eps rows)
        m = x.astype(np.float64).mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        with np.errstate(all="ignore"):
            return ((x - m) / np.sqrt(v)).astype(np.float32)

    budget = {"expected_failures": {"eps_edges": "ignores eps on purpose"}}
    r = lnorm.verify(no_eps, properties=("eps_edges",), cases=12, budget=budget)
    o = r.outcome("eps_edges")
    assert o.status == "xfail" and o.expected_reason == "ignores eps on purpose"
    assert r  # an expected failure is not a failure
    assert not lnorm.verify(no_eps, properties=("eps_edges",), cases=12)


@pytest.mark.parametrize(
    "kernel, message",
    [
        (lambda x, g, b, eps: (_ for _ in ()).throw(ValueError("boom")), "fn raised ValueError: boom"),
        (lambda x, g, b, eps: x[:, :1].copy() if x.shape[1] > 1 else x[:0], "fn returned y of shape"),
        (lambda x, g, b, eps: x.astype(np.float64), "fn returned y of dtype float64; expected float32"),
        (lambda x, g, b, eps: "y", "fn returned y of type str"),
        (lambda x, g, b, eps: (x, x), "fn returned a sequence of 2"),
        (lambda x, g, b, eps: (exact_kernel(x, g, b, eps)[0], np.zeros(len(x) + 1, np.float32), np.zeros(len(x) + 1, np.float32)),
         "mean with"),
    ],
)
def test_a_misbehaving_callable_fails_each_property_with_its_message_and_the_run_goes_on(kernel, message):
    r = lnorm.verify(kernel, properties=("shape", "accuracy"), cases=4)
    assert len(r.outcomes) == 2
    for o in r.outcomes:
        assert o.status == "FAIL", o
        assert message in o.message, o.message


def test_nan_where_the_answer_is_finite_fails_accuracy():
    def nan_kernel(x, gamma, beta, eps):
        y = exact_kernel(x, gamma, beta, eps)[0].copy()
        y[0, 0] = np.nan
        return y

    r = lnorm.verify(nan_kernel, properties=("accuracy",), cases=8)
    assert not r and "non-finite mismatch" in r.outcome("accuracy").message


def test_a_kernel_that_depends_on_the_call_fails_determinism():
    calls = [0]

    def flaky(x, gamma, beta, eps):
        calls[0] += 1
        y = exact_kernel(x, gamma, beta, eps)[0].copy()
        if calls[0] % 2 == 0:
            y.view(np.uint32)[...] ^= 1  # one ulp off on every other call
        return y

    r = lnorm.verify(flaky, properties=("determinism",), cases=4)
    assert r.outcome("determinism").status == "FAIL"


def test_verify_inside_the_callable_is_refused_not_deadlocked():
    def nested(x, gamma, beta, eps):
        lnorm.verify(exact_kernel, properties=("shape",), cases=1)
        return exact_kernel(x, gamma, beta, eps)

    r = lnorm.verify(nested, properties=("shape",), cases=2)
    assert "inside the callable" in r.outcome("shape").message


def test_torch_layer_norm_itself_is_adapted_by_torch_kernel():
    # The call a user types first: no lambda. torch_kernel calls it with normalized_shape = the last dim.
    torch = pytest.importorskip("torch")
    r = lnorm.verify(lnorm.torch_kernel(torch.nn.functional.layer_norm), properties=("shape", "accuracy"), cases=24)
    assert r.outcome("shape").status == "pass"
    assert "normalized_shape" not in r.outcome("accuracy").message
