"""lnorm.reference and lnorm.check: the exact answer and the accuracy gate of ``lnorm check``, on NumPy arrays (or
CPU torch tensors). The assertions built on them are in _asserts.py."""

import warnings
from dataclasses import dataclass
from typing import Optional

from . import _lnorm
from ._quant import check_quant, reference_quant
from ._torch import to_numpy


def _arrays(dtype, **named):
    """Torch tensors to arrays; a bf16 tensor anywhere sets dtype='bf16' when dtype is None."""
    out = {}
    for what, a in named.items():
        arr, implied = to_numpy(a, what)
        if implied and dtype is None:
            dtype = implied
        out[what] = arr
    return dtype, out


def _quant_args_need_quant(quant, scaling, scale, **more):
    """scale=, scaling= (other than the default) and the quantized output's other arguments mean nothing without
    quant=: refused, as the CLI refuses --scale without --quant, rather than ignored."""
    if quant is not None:
        return
    given = [name for name, v in (("scale", scale), *more.items()) if v is not None]
    if scaling != "tensor":
        given.insert(0, "scaling")
    if given:
        raise ValueError(f"{given[0]}=: needs quant= (it describes a quantized output)")


def reference(x, gamma=None, beta=None, *, axis=-1, eps=1e-5, dtype=None, threads=None, op="layernorm",
              gamma_offset=0.0, residual=None, quant=None, scaling="tensor", scale=None, global_scale=None,
              mx_rule=None, scale_format=None, scale_layout=None):
    """The exact answer for x rounded once to its format: (y, mean, rstd) for op="layernorm", (y, rstd)
    for op="rmsnorm" (y = x / sqrt(mean(x^2) + eps) * (gamma_offset + gamma) (+ beta): no mean).

    x is normalized from ``axis`` on (ONNX's axis). gamma/beta: shaped like x.shape[axis:] (or 1-d),
    None for 1 / 0; x's dtype, or float32 beside float16/bf16 x (weights kept in f32). gamma_offset C:
    y uses (C + gamma), 1 for Gemma's (1 + w), exactly. mean and rstd are float32 (float64 for f64
    data), shaped x.shape[:axis] + (1,) * (x.ndim - axis). bf16 data: uint16 bit patterns with
    dtype="bf16". Contiguous inputs are read in place; others are copied first. threads: default all cores.

    residual: Add & Norm (op becomes "add_layernorm" / "add_rmsnorm"): h = x + residual rounded once to the
    residual's dtype (x's, or float32 beside 16-bit x), then the norm of h as stored; h is appended to the
    returned tuple: (y, mean, rstd, h) or (y, rstd, h).

    quant (a name in lnorm.QUANT_FORMATS: "fp8_e4m3", "int8", ...): the exact quantized output instead, (q, scales): y* divided by its
    scale and rounded once, saturating; scaling "tensor" (scale= an f32, required), "row", "group:G", "mx" or
    "nvfp4" (quant="fp4_e2m1": blocks of 16, uint8 E4M3 block scales, global_scale= G an f32, default the tensor's
    own 2688/amax|y*|); mx_rule= with "mx": "floor" (default), "ceil", "even" or "rceil"; scale_format= with "row" or
    "group:G": "f32" (default) or "ue8m0" (powers of two as E8M0 codes). scales: None for tensor; float32, or uint8
    E8M0/E4M3 codes, shaped x.shape[:axis] + (groups,); scale_layout= "col" gives them column-major, (groups,) +
    x.shape[:axis], and "swizzled" (one-byte codes only) as the 128x4 tiles block-scaled GEMMs read: one dimension
    of round_up(rows, 128) * round_up(groups, 4) bytes, the padding 0 (docs/cli.md "Scale layouts").
    """
    _quant_args_need_quant(quant, scaling, scale, global_scale=global_scale, mx_rule=mx_rule,
                           scale_format=scale_format, scale_layout=scale_layout)
    dtype, a = _arrays(dtype, x=x, gamma=gamma, beta=beta, residual=residual)
    if quant is not None:
        return reference_quant(a, dtype, quant=quant, scaling=scaling, scale=scale, axis=axis, eps=eps, threads=threads,
                               op=op, gamma_offset=gamma_offset, global_scale=global_scale, mx_rule=mx_rule,
                               scale_format=scale_format, scale_layout=scale_layout)
    return _lnorm.reference(a["x"], a["gamma"], a["beta"], axis=axis, eps=eps, dtype=dtype, threads=threads, op=op,
                            gamma_offset=float(gamma_offset), residual=a["residual"])


def number_text(value, limit):
    """value with 3 significant digits, or more until its text compares with limit's as the values do: an
    error of 8.0001 against a budget of 8 reads "8.0001", not "8" (as `lnorm check` prints it)."""
    for digits in range(3, 17):
        t, lt = f"{value:.{digits}g}", f"{limit:.{digits}g}"
        if (value > limit) == (float(t) > float(lt)) and (value < limit) == (float(t) < float(lt)):
            return t
    return f"{value:.17g}"


def detail_lines(name, s, unit):
    """The lines `lnorm check` prints under its summary for one measured output (a dict with worst_over_budget,
    bias, over_budget, elements): the element furthest over its own allowance, and the bias gate."""
    lines = []
    w = s.get("worst_over_budget")
    if s.get("over_budget", 0) > 0 and w is not None:
        err = "inf" if w["error"] == float("inf") else number_text(w["error"], w["allowed"])
        lines.append(f"  over      {name} {w['index']}: got {w['got']!r}, exact {w['exact']!r}, {err} scaled ulp > "
                     f"allowed {number_text(w['allowed'], w['error'])} (row kappa {w['kappa']:.4g}); "
                     f"{s['over_budget']} of {s['elements']} elements over budget")
    b = s.get("bias")
    if b is not None and b["gated"] and b["elements"] > 0:
        m, bound = b["mean_signed_error"], b["bound"]
        sign = "+" if m >= 0 else "-"
        kappa = b.get("mean_kappa_allowed", 0.0)
        kappa_text = f" + kappa part {number_text(kappa, 0)}" if kappa > 0 else ""
        lines.append(f"  bias      {name} mean signed error {sign}{number_text(abs(m), bound)} scaled ulp over "
                     f"{b['elements']} elements, bound {number_text(bound, abs(m))} (0.5 + 3 x mean allowance "
                     f"{b['mean_allowed'] - kappa:.4g} / sqrt({b['units']} {unit}){kappa_text})"
                     f"{'' if b['pass'] else ': a systematic error, FAIL'}")
    return lines


@dataclass(frozen=True)
class CheckResult:
    """What ``lnorm check --json`` reports; truthy when within budget. ``str()`` is the CLI's verdict."""

    passed: bool
    op: str                      # "layernorm", "rmsnorm", or with residual= "add_layernorm" / "add_rmsnorm"
    shape: tuple
    axis: int
    dtype: str
    param_dtype: str             # gamma/beta's storage: dtype, or f32 beside f16/bf16 x
    gamma_offset: float          # y used (gamma_offset + gamma)
    eps: float
    rows: int
    cols: int
    elements: int
    max_ulp: float               # worst scaled ulp error of y; inf where any element is a non-finite mismatch
    max_ulp_nonfinite: bool      # max_ulp is inf: some element is a non-finite mismatch (max_ulp_index: the first)
    max_finite_ulp: float        # worst scaled ulp error over the elements without a non-finite mismatch
    max_ulp_index: Optional[tuple]  # where, as an index into x's shape
    max_ulp_kappa: float         # that row's condition number |mean|/sqrt(var + eps)
    max_ulp_got: float
    max_ulp_exact: float
    correctly_rounded: float     # fraction of y bit-identical to the exact answer rounded once
    nonfinite_mismatches: int    # NaN or ±Inf where the answer is finite, finite where it is NaN, ±Inf where
                                 # it does not round to ±Inf
    first_nonfinite_mismatch_index: Optional[tuple]
    over_budget: int             # elements over a + b*kappa (non-finite mismatches included)
    budget: dict                 # {"a": max_ulp, "b": max_ulp_per_kappa}
    # When mean= / rstd= were given: max_ulp (inf on a non-finite mismatch), max_ulp_nonfinite, metric,
    # max_ulp_row, got, exact, nonfinite_mismatches, budget, pass. The mean's error is in ulps of
    # max(|mean|, sqrt(var + eps)), as lnorm verify and budgets.toml measure it; rstd's is a plain ulp distance.
    mean: Optional[dict]
    rstd: Optional[dict]
    # When recipe= was given: name, metric, max_ulp (inf on a non-finite mismatch), max_ulp_nonfinite,
    # max_finite_ulp, max_ulp_index, max_ulp_got, max_ulp_recipe, correctly_rounded, nonfinite_mismatches,
    # over_budget, budget, pass — y against the recipe's answer (lnorm check --recipe).
    recipe: Optional[dict] = None
    # With residual= and h=: h against the exact sum x + residual, in ulps of h's format (max_ulp,
    # correctly_rounded, nonfinite_mismatches, over_budget, budget, pass, ...); passed is y's AND h's.
    h: Optional[dict] = None
    residual_dtype: Optional[str] = None  # Add & Norm: the residual's (and h's) dtype
    y_pass: bool = True                   # y against the exact answer alone
    y_gated: bool = True                  # y_pass counts in passed (False with a recipe and no max_ulp: the recipe gates)
    # The element furthest over its own allowance (where a FAIL is; not always the element of max_ulp): index,
    # error, allowed (a + b*kappa at its row's kappa, in scaled ulps), kappa, got, exact.
    worst_over_budget: Optional[dict] = None
    # The bias gate: mean_signed_error (scaled ulps, positive above the exact answer), bound (0.5 + 3 x the mean
    # flat allowance / sqrt(units) + mean_kappa_allowed), mean_allowed, elements, units (distinct rows), gated, pass
    # (docs/verify.md "The mean signed error").
    bias: Optional[dict] = None

    @property
    def nan_mismatches(self):
        """Deprecated alias of nonfinite_mismatches (it counted infinities too); goes in the next release."""
        warnings.warn("CheckResult.nan_mismatches is deprecated: use nonfinite_mismatches", DeprecationWarning, 2)
        return self.nonfinite_mismatches

    @property
    def first_nan_mismatch_index(self):
        """Deprecated alias of first_nonfinite_mismatch_index."""
        warnings.warn("CheckResult.first_nan_mismatch_index is deprecated: use first_nonfinite_mismatch_index",
                      DeprecationWarning, 2)
        return self.first_nonfinite_mismatch_index

    def __bool__(self):
        return self.passed

    def __str__(self):
        b = self.budget
        # RMSNorm has no mean, so no kappa (0 by definition): print the budget that applies, as `lnorm check`.
        budget = f"{b['a']:g} + {b['b']:g}*kappa" if "layernorm" in self.op else f"{b['a']:g}"
        if not self.y_gated:
            budget = "not gated: the recipe is; max_ulp gates it too"
        top = "inf" if self.max_ulp == float("inf") else number_text(self.max_ulp, b["a"])
        head = (f"{'PASS' if self.passed else 'FAIL'}  y max {top} scaled ulp "
                f"(budget {budget})  correctly rounded {100 * self.correctly_rounded:.2f}%  "
                f"non-finite mismatches {self.nonfinite_mismatches}")
        if self.y_gated and self.bias is not None and not self.bias["pass"]:
            head += f"  bias {self.bias['mean_signed_error']:+.3g} scaled ulp (bound {self.bias['bound']:.3g})"
        if self.mean is not None:
            head += f"  mean {self.mean['max_ulp']:g} ulp"
        if self.rstd is not None:
            head += f"  rstd {self.rstd['max_ulp']:g} ulp"
        hs = self.h
        if hs is not None:
            head += (f"  h max {hs['max_ulp']:.3g} ulp (budget {hs['budget']:g}) correctly rounded "
                     f"{100 * hs['correctly_rounded']:.2f}%")
        r = self.recipe
        if r is not None:
            head += (f"  recipe {r['name']} max {r['max_ulp']:.3g} ulp (budget {r['budget']:g}) correctly rounded "
                     f"{100 * r['correctly_rounded']:.2f}%")
        params = (f", gamma/beta {self.param_dtype}" if self.param_dtype != self.dtype else "") + (
            f", weight {self.gamma_offset:.9g} + gamma" if self.gamma_offset else "") + (
            f", residual {self.residual_dtype}" if self.residual_dtype else "")
        lines = [head, f"  input     {self.shape}, {self.op} {self.dtype}, axis {self.axis}, eps {self.eps:.9g}, "
                       f"{self.rows} rows x {self.cols}{params}"]
        if r is not None:
            lines.append(f"  recipe    y is {r['max_ulp']:.3g} ulp from the {r['name']} recipe, {self.max_ulp:.3g} scaled ulp "
                         f"from the exact {self.op}; correctly rounded: {100 * r['correctly_rounded']:.2f}% to the recipe, "
                         f"{100 * self.correctly_rounded:.2f}% to the exact answer; {r['over_budget']} of {self.elements} "
                         f"over the recipe's budget")
        if self.max_ulp_index is not None:
            lines.append(f"  worst y   {self.max_ulp_index}: got {self.max_ulp_got!r}, exact {self.max_ulp_exact!r}, "
                         f"{self.max_ulp:.4g} scaled ulp{' (non-finite mismatch)' if self.max_ulp_nonfinite else ''}, "
                         f"row kappa {self.max_ulp_kappa:.3g}")
        if self.nonfinite_mismatches:
            lines.append(f"  finite    max {self.max_finite_ulp:.4g} scaled ulp over the elements without a "
                         f"non-finite mismatch")
        lines.append(f"  over budget {self.over_budget} of {self.elements} elements")
        lines += detail_lines("y", {"worst_over_budget": self.worst_over_budget, "bias": self.bias,
                                    "over_budget": self.over_budget, "elements": self.elements}, "rows")
        if self.first_nonfinite_mismatch_index is not None:
            lines.append(f"  first non-finite mismatch at {self.first_nonfinite_mismatch_index}")
        for what, s in (("mean", self.mean), ("rstd", self.rstd)):
            if s is not None and s["max_ulp_row"] >= 0:
                lines.append(f"  {what:<9} max {s['max_ulp']:g} {s['metric']} at row {s['max_ulp_row']} "
                             f"(got {s['got']:.9g}, exact {s['exact']:.9g}), "
                             f"non-finite mismatches {s['nonfinite_mismatches']}")
        return "\n".join(lines)


def check(x, y, gamma=None, beta=None, *, axis=-1, eps=1e-5, max_ulp=None, max_ulp_per_kappa=1, mean=None, rstd=None,
          max_mean_ulp=None, max_rstd_ulp=None, dtype=None, threads=None, op="layernorm", gamma_offset=0.0,
          recipe=None, max_recipe_ulp=0.5, residual=None, h=None, max_h_ulp=None, quant=None, scaling="tensor",
          scale=None, scales=None, max_q_ulp=None, max_scale_ulp=None, quant_y=None, global_scale=None, mx_rule=None,
          scale_format=None, scale_layout=None):
    """Measures a candidate output y (and optionally mean/rstd) against the exact answer for x: the
    LayerNorm of x, or op="rmsnorm" (no mean: mean= is refused), with gamma_offset as in reference().

    Budget: max_ulp (default 8) + max_ulp_per_kappa * kappa scaled ulps per element, in ulps of the compute
    format (f32; f64 for f64) from the interval of reals that round to the output (docs/verify.md "How error is
    measured"), and the mean signed error within its bound (.bias); max_mean_ulp / max_rstd_ulp also gate the statistics (default: reported only): the mean
    in ulps of max(|mean|, sqrt(var + eps)) as lnorm verify measures it, rstd in plain ulps.
    recipe: also measure y against a recipe's answer ("llama": the normalized value rounded to x's dtype
    before the weight multiply; "gemma": weight 1 + gamma in f32, one rounding at the end — it sets
    gamma_offset to 1), gated by max_recipe_ulp (default 0.5); the result's .recipe holds that measurement
    and the exact answer's stays in max_ulp, reported (y_pass) and gated only when max_ulp is given (docs/cli.md
    "Recipes").
    residual: Add & Norm — y is measured against the norm of the exact h (x + residual rounded once),
    whatever the candidate's h; h= also measures a candidate h against the exact sum, gated by max_h_ulp
    (default 0.5: the sum rounded once); the result's .h holds it.
    Returns a CheckResult, truthy when within budget. The GIL is released while it measures.
    quant: y is a quantized output q (uint8 fp8 bit patterns or int8) with its scales= (row, group:G, mx; scale=
    for tensor), measured as ``lnorm check --quant``: in quanta at y*/s with the candidate's own scales, the scales
    against the exact ones; max_q_ulp / max_scale_ulp make the budgets flat; recipe= (naming "vllm") also measures q
    against the recipe's rounding points, gated by max_recipe_ulp quanta. quant_y: the y the candidate's quantizer
    was handed (float32, or float16): q and the scales are also gated against the quantizer's rule applied to it, bit
    for bit, no budget (``lnorm check --quant --y``; the vllm rule with recipe=); the result's .consistency.
    scales= come in scale_layout= ("row", "col" or "swizzled", as reference() gives them); swizzled padding that is
    not 0 fails the scales (.scales["padding_nonzero"]).
    Returns a QuantCheckResult.
    """
    if quant_y is not None and quant is None:
        raise ValueError("quant_y: the y a quantizer was handed; needs quant=")
    _quant_args_need_quant(quant, scaling, scale, scales=scales, max_q_ulp=max_q_ulp, max_scale_ulp=max_scale_ulp,
                           global_scale=global_scale, mx_rule=mx_rule,
                           scale_format=scale_format, scale_layout=scale_layout)
    if quant is not None:
        if mean is not None or rstd is not None or h is not None:
            raise ValueError("quant: mean=, rstd= and h= are not measured with a quantized output yet")
        dtype, a = _arrays(dtype, x=x, gamma=gamma, beta=beta, residual=residual)
        # q, its scales and the y handed to the quantizer as NumPy arrays too (CPU torch tensors taken, as for x).
        q, _ = to_numpy(y, "y")
        scales, _ = to_numpy(scales, "scales")
        quant_y, _ = to_numpy(quant_y, "quant_y")
        return check_quant(a, q, dtype, quant=quant, scaling=scaling, scale=scale, scales=scales, max_q_ulp=max_q_ulp,
                           max_scale_ulp=max_scale_ulp, axis=axis, eps=eps, threads=threads, op=op,
                           gamma_offset=gamma_offset, recipe=recipe, max_recipe_ulp=max_recipe_ulp, quant_y=quant_y,
                           global_scale=global_scale, mx_rule=mx_rule,
                           scale_format=scale_format, scale_layout=scale_layout)
    dtype, a = _arrays(dtype, x=x, y=y, gamma=gamma, beta=beta, mean=mean, rstd=rstd, residual=residual, h=h)
    d = _lnorm.check(a["x"], a["y"], a["gamma"], a["beta"], axis=axis, eps=eps,
                     max_ulp=None if max_ulp is None else float(max_ulp),
                     max_ulp_per_kappa=float(max_ulp_per_kappa), mean=a["mean"], rstd=a["rstd"],
                     max_mean_ulp=max_mean_ulp, max_rstd_ulp=max_rstd_ulp, dtype=dtype, threads=threads, op=op,
                     gamma_offset=float(gamma_offset), recipe=recipe, max_recipe_ulp=float(max_recipe_ulp),
                     residual=a["residual"], h=a["h"], max_h_ulp=None if max_h_ulp is None else float(max_h_ulp))
    d["passed"] = d.pop("pass")
    return CheckResult(**d)
