"""lnorm.reference_backward and lnorm.check_backward: the exact gradients of LayerNorm and RMSNorm and the gate
of ``lnorm check --dir bwd``, on NumPy arrays (or CPU torch tensors)."""

from dataclasses import dataclass
from typing import Optional

from . import _lnorm
from ._check import _arrays, detail_lines, number_text


def reference_backward(x, dy, gamma=None, *, axis=-1, eps=1e-5, dtype=None, threads=None, op="layernorm",
                       gamma_offset=0.0):
    """The exact gradients of the norm at x (and gamma) for the upstream gradient dy, each rounded once:
    (dx, dgamma, dbeta). dx is x's shape and dtype; dgamma and dbeta have the normalized dims' shape in
    gamma's dtype (x's, or float32 beside 16-bit x; x's without gamma). With w = gamma_offset + gamma,
    g = dy*w, xhat = (x - mean)*rstd (RMSNorm: x*rstd): dx = rstd*(g - mean(g) - xhat*mean(g*xhat)) (RMSNorm
    without mean(g)), dgamma = sum over rows of dy*xhat, dbeta = sum over rows of dy."""
    dtype, a = _arrays(dtype, x=x, dy=dy, gamma=gamma)
    return _lnorm.reference_backward(a["x"], a["dy"], a["gamma"], axis=axis, eps=eps, dtype=dtype, threads=threads, op=op,
                                     gamma_offset=float(gamma_offset))


@dataclass(frozen=True)
class BackwardCheckResult:
    """What ``lnorm check --dir bwd --json`` reports; truthy when every gradient given is within budget."""

    passed: bool
    op: str
    shape: tuple
    axis: int
    dtype: str
    param_dtype: str
    eps: float
    gamma_offset: float
    dgamma_undecided: int     # dgamma columns rounded from 6144 bits, not decided exactly (0 in practice)
    # Each gradient given: max_ulp (inf on a non-finite mismatch), max_ulp_nonfinite, max_finite_ulp,
    # max_ulp_index (a tuple), max_ulp_got, max_ulp_exact, correctly_rounded, nonfinite_mismatches,
    # over_budget, elements, budget, worst_over_budget, bias, pass; None when not given. Scaled ulps of the
    # compute format against each gradient's scale (docs/DESIGN.md "Backward", docs/verify.md).
    dx: Optional[dict]
    dgamma: Optional[dict]
    dbeta: Optional[dict]

    def __bool__(self):
        return self.passed

    def __str__(self):
        parts = [f"{'PASS' if self.passed else 'FAIL'} "]
        for nm in ("dx", "dgamma", "dbeta"):
            s = getattr(self, nm)
            if s is not None:
                top = "inf" if s["max_ulp"] == float("inf") else number_text(s["max_ulp"], s["budget"])
                parts.append(f" {nm} max {top} scaled ulp (budget {s['budget']:g}) correctly rounded "
                             f"{100 * s['correctly_rounded']:.2f}% non-finite mismatches {s['nonfinite_mismatches']}"
                             f"{'' if s['bias']['pass'] else ' BIASED'} ")
        lines = ["".join(parts), f"  input     {self.shape}, {self.op} backward {self.dtype}, axis {self.axis}, "
                                 f"eps {self.eps:.9g}"]
        for nm in ("dx", "dgamma", "dbeta"):
            s = getattr(self, nm)
            if s is not None and s["max_ulp_index"] is not None:
                lines.append(f"  worst {nm:<6} at {s['max_ulp_index']}: got {s['max_ulp_got']!r}, exact "
                             f"{s['max_ulp_exact']!r}, {s['max_ulp']:.4g} scaled ulp; {s['over_budget']} of "
                             f"{s['elements']} over budget")
                lines += detail_lines(nm, s, "rows" if nm == "dx" else "columns")
        return "\n".join(lines)


def check_backward(x, dy, gamma=None, *, dx=None, dgamma=None, dbeta=None, axis=-1, eps=1e-5, dtype=None, threads=None,
                   op="layernorm", gamma_offset=0.0, max_ulp=8, max_ulp_per_kappa=1, max_dx_ulp=None, max_dgamma_ulp=None,
                   max_dbeta_ulp=None):
    """Measures candidate gradients (any of dx, dgamma, dbeta) against the exact ones, in scaled ulps, each
    gated by a + max_ulp_per_kappa*kappa, a its own budget (max_dx_ulp, ...) or max_ulp (default 8 + 1*kappa, as
    lnorm.check; kappa: dx's row's |mean|/sqrt(var + eps), dgamma's column's largest, none for dbeta).
    Returns a BackwardCheckResult."""
    dtype, a = _arrays(dtype, x=x, dy=dy, gamma=gamma, dx=dx, dgamma=dgamma, dbeta=dbeta)
    d = _lnorm.check_backward(a["x"], a["dy"], a["gamma"], dx=a["dx"], dgamma=a["dgamma"], dbeta=a["dbeta"], axis=axis,
                              eps=eps, dtype=dtype, threads=threads, op=op, gamma_offset=float(gamma_offset),
                              max_ulp=float(max_ulp), max_ulp_per_kappa=float(max_ulp_per_kappa), max_dx_ulp=max_dx_ulp, max_dgamma_ulp=max_dgamma_ulp,
                              max_dbeta_ulp=max_dbeta_ulp)
    d["passed"] = d.pop("pass")
    return BackwardCheckResult(**d)
