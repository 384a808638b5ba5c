"""lnorm.case / lnorm.cases and the Hypothesis strategy draw the suite's hard inputs reproducibly."""

import numpy as np
from hypothesis import given, settings

import lnorm
from lnorm.strategies import layernorm_inputs, rmsnorm_inputs


def test_the_same_seed_gives_the_same_arrays_and_another_seed_others():
    a, b, c = (lnorm.case("normal", shape=(3, 9), seed=s) for s in (5, 5, 6))
    assert np.array_equal(a.x, b.x) and not np.array_equal(a.x, c.x)


def test_cases_cover_every_class_and_width_and_the_eps_edges():
    cs = lnorm.cases(max_width=17)
    widths = {c.x.shape[-1] for c in cs}
    assert widths == {w for w in lnorm.EDGE_WIDTHS if w <= 17}
    assert {c.description.split()[1] for c in cs} == set(lnorm.ROW_CLASSES)
    assert {c.eps for c in cs} >= {0.0, float(np.float32(1e-12)), 1.0}
    assert [c.description for c in cs] == [c.description for c in lnorm.cases(max_width=17)]


def test_offset_rows_reach_the_asked_condition_number():
    c = lnorm.case("offset", shape=(2, 256), kappa=1e6, seed=3)
    x = c.x.astype(np.float64)
    kappa = np.abs(x.mean(-1)) / x.std(-1)
    assert np.all(kappa > 1e5)


def test_exact_stats_rows_have_a_power_of_two_mean_exact_in_float32():
    c = lnorm.case("exact_stats", shape=(3, 64), seed=1)
    m32 = c.x.mean(-1, dtype=np.float32)
    assert np.array_equal(m32, c.x.astype(np.float64).mean(-1))
    assert np.all(np.log2(np.abs(m32)) == np.round(np.log2(np.abs(m32))))


def test_nonfinite_rows_hold_nan_or_inf_and_their_answer_is_nan():
    c = lnorm.case("nonfinite", shape=(2, 16), seed=2)
    assert not np.all(np.isfinite(c.x))
    y, _, _ = c.reference()
    assert np.all(np.isnan(y[~np.all(np.isfinite(c.x), axis=-1)]))


@settings(max_examples=40, deadline=None, database=None)  # no .hypothesis folder written into the tree
@given(layernorm_inputs(dtype="f32", max_cols=80))
def test_strategy_cases_are_valid_inputs_and_the_reference_checks_exact_on_them(case):
    assert case.x.dtype == np.float32 and case.x.shape[-1] <= 80
    y, _, _ = case.reference()
    r = lnorm.check(case.x, y, case.gamma, case.beta, eps=case.eps, max_ulp=0.5, max_ulp_per_kappa=0)
    assert r and r.correctly_rounded == 1.0, str(r)


@settings(max_examples=40, deadline=None, database=None)
@given(rmsnorm_inputs(dtype="bf16", max_cols=80))
def test_rmsnorm_strategy_cases_have_no_beta_and_the_rmsnorm_reference_checks_exact_on_them(case):
    assert case.op == "rmsnorm" and case.beta is None and case.x.dtype == np.uint16
    y, rstd = case.reference()
    r = lnorm.check(case.x, y, case.gamma, eps=case.eps, dtype="bf16", op="rmsnorm", max_ulp=0.5, max_ulp_per_kappa=0)
    assert r and r.correctly_rounded == 1.0, str(r)


def test_rmsnorm_cases_tiny_rows_sit_at_zero_so_eps_dominates():
    # RMSNorm's tiny class: mean(x^2) << eps; a LayerNorm tiny row may sit at any offset.
    c = lnorm.cases(classes=("tiny",), widths=(64,), eps=1e-5, op="rmsnorm")[0]
    x = c.x.astype(np.float64)
    assert c.op == "rmsnorm" and c.beta is None
    assert np.all((x * x).mean(-1) < 1e-3 * c.eps)
