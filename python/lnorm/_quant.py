"""Quantized outputs (docs/python.md "Quantized outputs"): q = Q(y / s) in a format of lnorm.QUANT_FORMATS
(fp8_e4m3, int8, the FNUZ pair, ...) with a scaling of lnorm.SCALINGS, as ``lnorm reference/run/check --quant``.
lnorm.reference, lnorm.run and lnorm.check take ``quant=`` and call these; q travels as uint8 bit patterns (fp8; fp4_e2m1
two a byte, element 2i in the low nibble, shaped x.shape[:axis] + (cols/2,)) or int8, scales as float32 (row, group:G,
shaped x.shape[:axis] + (groups,)) or uint8 E8M0 / E4M3 codes (mx, nvfp4, ue8m0), in scale_layout= ("row", "col",
"swizzled"); decode() and decode_e8m0() give their values."""

from dataclasses import dataclass
from typing import Optional

from . import _lnorm


@dataclass(frozen=True)
class QuantCheckResult:
    """What ``lnorm check --quant --json`` reports; truthy when q (and dynamic scales) are within budget.

    q: max_ulp (quanta at y*/s, inf on a non-finite mismatch), max_ulp_index, max_ulp_got, max_ulp_target,
    correctly_rounded, nonfinite_mismatches, saturated, over_budget, budget, pass. scales (None for tensor
    scaling): max_ulp (f32 ulps; mx: E8M0 steps; nvfp4: E4M3 steps), zero_groups, over_budget, budget, layout,
    padding_nonzero (swizzled's padding scales that are not 0: a failure), pass. recipe (None without
    recipe=): name, max_ulp (quanta at the recipe's value), matching (the fraction that is the recipe's code),
    nonfinite_mismatches, scales_differ, budget, pass. consistency (None without quant_y=): q and the scales against
    the quantizer's rule applied to the y it was handed, bit for bit: rule, codes, codes_differ, scales,
    scales_differ, first (up to five mismatches), pass."""

    passed: bool
    op: str
    dtype: str
    shape: tuple
    quant: str
    scaling: str
    q: dict
    scales: Optional[dict]
    recipe: Optional[dict] = None
    consistency: Optional[dict] = None

    def __bool__(self):
        return self.passed

    def __str__(self):
        q = self.q
        line = (f"{'PASS' if self.passed else 'FAIL'}  q {self.quant}/{self.scaling} max {q['max_ulp']:.3g} quanta  "
                f"correctly rounded {100 * q['correctly_rounded']:.2f}%  non-finite mismatches {q['nonfinite_mismatches']}  "
                f"saturated {q['saturated']}")
        if self.scales is not None:
            line += f"  scales max {self.scales['max_ulp']:.3g}, {self.scales['over_budget']} over budget"
            if self.scales.get("padding_nonzero"):
                line += f", {self.scales['padding_nonzero']} swizzled padding scales not 0"
        if self.recipe is not None:
            r = self.recipe
            line += (f"  recipe {r['name']} max {r['max_ulp']:.3g} quanta (budget {r['budget']:g}), "
                     f"{100 * r['matching']:.2f}% its code, {r['scales_differ']} scales differ")
        if self.consistency is not None:
            c = self.consistency
            line += (f"  consistency {'PASS' if c['pass'] else 'FAIL'}: {c['codes_differ']} of {c['codes']} codes, "
                     f"{c['scales_differ']} of {c['scales']} scales differ from the rule on the y handed in")
        return line


def reference_quant(a, dtype, *, quant, scaling, scale, axis, eps, threads, op, gamma_offset, global_scale=None, mx_rule=None,
                    scale_format=None, scale_layout=None):
    return _lnorm.quant_reference(a["x"], a["gamma"], a["beta"], quant=quant, scaling=scaling, scale=scale, axis=axis,
                                  eps=eps, dtype=dtype, threads=threads, op=op, gamma_offset=float(gamma_offset),
                                  residual=a["residual"], global_scale=global_scale, mx_rule=mx_rule,
                                  scale_format=scale_format, scale_layout=scale_layout)


def run_quant(name, a, dtype, *, quant, scaling, scale, axis, eps, threads, op, gamma_offset, global_scale=None, mx_rule=None,
              scale_format=None, scale_layout=None):
    return _lnorm.quant_run(name, a["x"], a["gamma"], a["beta"], quant=quant, scaling=scaling, scale=scale, axis=axis,
                            eps=eps, dtype=dtype, threads=threads, op=op, gamma_offset=float(gamma_offset),
                            residual=a["residual"], global_scale=global_scale, mx_rule=mx_rule,
                            scale_format=scale_format, scale_layout=scale_layout)


def check_quant(a, q, dtype, *, quant, scaling, scale, scales, max_q_ulp, max_scale_ulp, axis, eps, threads, op,
                gamma_offset, recipe=None, max_recipe_ulp=0.5, quant_y=None, global_scale=None, mx_rule=None,
                scale_format=None, scale_layout=None):
    d = _lnorm.quant_check(a["x"], q, a["gamma"], a["beta"], quant=quant, scaling=scaling, scale=scale, scales=scales,
                           max_q_ulp=max_q_ulp, max_scale_ulp=max_scale_ulp, axis=axis, eps=eps, dtype=dtype,
                           threads=threads, op=op, gamma_offset=float(gamma_offset), residual=a["residual"],
                           recipe=recipe, max_recipe_ulp=float(max_recipe_ulp), quant_y=quant_y,
                           global_scale=global_scale, mx_rule=mx_rule,
                           scale_format=scale_format, scale_layout=scale_layout)
    d["passed"] = d.pop("pass")
    return QuantCheckResult(**d)


def decode(q, format):
    """The values of quantized codes as float64 (NaN for the NaN codes, ±inf for E5M2's): format is a name in
    lnorm.QUANT_FORMATS (fp8 formats as uint8 bit patterns, int8 as int8; FNUZ's 0x80 is NaN). fp4_e2m1's q is
    packed two codes a byte, element 2i in byte i's low nibble, shaped x.shape[:axis] + (cols/2,): decode unpacks
    it, so the last dimension doubles."""
    return _lnorm.decode(q, format)


def decode_e8m0(codes):
    """mx scales' values, 2^(code − 127) as float64 (NaN for code 255)."""
    return _lnorm.decode_e8m0(codes)
