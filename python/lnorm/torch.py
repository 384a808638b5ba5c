"""The norms of a PyTorch model, found, configured and gated (docs/python.md "Model audit").

    import lnorm.torch
    print(lnorm.torch.audit(model, x))            # one row per norm: path, kind, configuration, worst, verdict
    print(lnorm.torch.compare(model, converted, x))   # per norm: what changed, configuration and output

audit finds every norm module: nn.LayerNorm, and RMSNorm modules by their shape (a 1-d weight and an eps,
variance_epsilon or epsilon attribute; torch 1.13 has no nn.RMSNorm), Gemma's (1 + w) form by its class name. One
forward pass with hooks captures each one's first input and output; each output is gated against the exact answer
for that module's own configuration (lnorm.check), and where it fails, the recipes that could explain it (llama:
the normalized value rounded to x's dtype before the weight; gemma: 1 + w in f32) are tried.
"""
from dataclasses import dataclass, field
from typing import Optional

import torch
from torch import nn

from ._check import check

_EPS_NAMES = ("eps", "variance_epsilon", "epsilon")
_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64"}


@dataclass
class NormConfig:
    """A norm module's configuration as its parameters and attributes say."""

    kind: str                # "layernorm" or "rmsnorm"
    normalized_shape: tuple  # the normalized dims (the trailing ones)
    eps: float
    affine: str              # "weight+bias", "weight" or "none"
    param_dtype: Optional[str]
    gamma_offset: float = 0.0  # 1: Gemma's (1 + w)
    module_class: str = ""

    def text(self):
        offset = ", (1 + w)" if self.gamma_offset else ""
        return (f"{self.kind} shape={self.normalized_shape} eps={self.eps:g} affine={self.affine}"
                f"{'' if self.param_dtype is None else ' params=' + self.param_dtype}{offset}")


@dataclass
class AuditRow:
    path: str
    config: NormConfig
    dtype: Optional[str] = None        # the captured input's
    out_dtype: Optional[str] = None
    calls: int = 0                     # forward calls seen (the first is gated)
    worst: Optional[float] = None      # scaled ulp against the exact answer for the module's configuration
    where: Optional[tuple] = None
    kappa: Optional[float] = None
    verdict: str = "not run"           # PASS, FAIL, "PASS (recipe R)" where a recipe explains it, ERROR, not run
    recipe: str = ""                   # what explains the output: "exact" (rounded once), a recipe, or nothing
    detail: str = ""
    x: Optional[torch.Tensor] = field(default=None, repr=False)
    y: Optional[torch.Tensor] = field(default=None, repr=False)


@dataclass
class Audit:
    rows: list

    @property
    def passed(self):
        return all(r.verdict.startswith("PASS") for r in self.rows)

    def __bool__(self):
        return self.passed

    def __str__(self):
        head = ["module", "kind", "configuration", "input", "worst scaled ulp", "verdict", "explained by"]
        body = []
        for r in self.rows:
            worst = "-" if r.worst is None else ("inf" if r.worst == float("inf") else f"{r.worst:.3g}")
            if r.where is not None:
                worst += f" at {r.where}"
            body.append([r.path, r.config.kind, r.config.text(), f"{r.dtype} {r.out_dtype and '-> ' + r.out_dtype}",
                         worst, r.verdict, r.recipe])
        widths = [max(len(str(c)) for c in col) for col in zip(head, *body)]
        lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in [head] + body]
        lines.insert(1, "  ".join("-" * w for w in widths))
        details = [f"{r.path}: {r.detail}" for r in self.rows if r.detail]
        return "\n".join(lines + details)


def _param_dtype(*params):
    for p in params:
        if p is not None:
            return _DTYPES.get(p.dtype, str(p.dtype))
    return None


def norm_config(module):
    """A NormConfig when the module is a norm lnorm knows (nn.LayerNorm, an RMSNorm by its shape), else None."""
    name = type(module).__name__
    if isinstance(module, nn.LayerNorm):
        w, b = module.weight, module.bias
        affine = "weight+bias" if b is not None else ("weight" if w is not None else "none")
        return NormConfig("layernorm", tuple(module.normalized_shape), float(module.eps), affine, _param_dtype(w, b),
                          module_class=name)
    eps = next((getattr(module, n) for n in _EPS_NAMES if isinstance(getattr(module, n, None), (float, int))), None)
    w = getattr(module, "weight", None)
    lower = name.lower()
    # A weight and an eps: a norm; a weight declared None and an eps in a class named ...Norm: one without gamma.
    weightless = w is None and hasattr(module, "weight") and "norm" in lower
    if eps is None or not (isinstance(w, torch.Tensor) or weightless) or any(True for _ in module.children()):
        return None
    b = getattr(module, "bias", None)
    b = b if isinstance(b, torch.Tensor) else None
    # RMSNorm unless its name or a bias says LayerNorm.
    kind = "layernorm" if ("layernorm" in lower or "layer_norm" in lower or b is not None) and "rms" not in lower \
        else "rmsnorm"
    affine = "weight+bias" if b is not None else ("none" if weightless else "weight")
    return NormConfig(kind, () if weightless else tuple(w.shape), float(eps), affine, _param_dtype(w, b),
                      gamma_offset=1.0 if "gemma" in lower else 0.0, module_class=name)


def find_norms(model):
    """[(path, module, NormConfig)] for every norm module of the model, in module order."""
    out = []
    for path, m in model.named_modules():
        cfg = norm_config(m)
        if cfg is not None:
            out.append((path or "(model)", m, cfg))
    return out


def _capture(model, inputs, norms):
    """Runs the model once with forward hooks: {path: (first input, first output, calls)}."""
    seen = {}
    handles = []
    for path, m, _ in norms:
        def hook(mod, args, out, path=path):
            x = args[0] if args else None
            if path not in seen:
                seen[path] = [x.detach().clone() if isinstance(x, torch.Tensor) else None,
                              out.detach().clone() if isinstance(out, torch.Tensor) else None, 0]
            seen[path][2] += 1
        handles.append(m.register_forward_hook(hook))
    try:
        with torch.no_grad():
            model(*inputs)
    finally:
        for h in handles:
            h.remove()
    return seen


def _gate(row, module):
    """Gates the captured output against the exact answer for the module's configuration; tries the recipes."""
    cfg, x, y = row.config, row.x, row.y
    if x is None or y is None:
        row.verdict, row.detail = "not run", "the module was not called on a tensor in the forward pass"
        return
    if y.dtype != x.dtype and y.dtype in _DTYPES and x.dtype in _DTYPES and x.element_size() <= y.element_size():
        x = x.to(y.dtype)  # a wider output (f32 weights over bf16 x): x widened exactly, gated in y's format
    gamma = getattr(module, "weight", None)
    beta = getattr(module, "bias", None) if cfg.kind == "layernorm" else None
    gamma = gamma.detach() if isinstance(gamma, torch.Tensor) else None
    beta = beta.detach() if isinstance(beta, torch.Tensor) else None
    if gamma is not None and gamma.dtype != x.dtype and gamma.dtype != torch.float32:
        gamma = gamma.to(torch.float32)  # lnorm takes x's dtype or f32 weights; the widening is exact
    if beta is not None and gamma is not None and beta.dtype != gamma.dtype:
        beta = beta.to(gamma.dtype)
    axis = -len(cfg.normalized_shape) if cfg.normalized_shape else -1
    common = dict(axis=axis, eps=cfg.eps, op=cfg.kind, gamma_offset=cfg.gamma_offset if gamma is not None else 0.0)
    if cfg.kind == "rmsnorm":
        common["max_ulp_per_kappa"] = 0
    try:
        r = check(x.contiguous(), y.contiguous(), gamma, beta, **common)
    except (ValueError, TypeError) as e:
        row.verdict, row.detail = "ERROR", str(e).splitlines()[0]
        return
    row.worst, row.where, row.kappa = r.max_ulp, r.max_ulp_index, r.max_ulp_kappa
    if r:
        row.verdict, row.recipe = "PASS", "exact (rounded once)"
        return
    row.verdict = "FAIL"
    w = r.worst_over_budget
    if w is not None:
        row.detail = (f"element {w['index']}: got {w['got']!r}, exact {w['exact']!r}, {w['error']:.4g} scaled ulp > "
                      f"allowed {w['allowed']:.4g} (row kappa {w['kappa']:.3g})")
    recipes = ["llama", "gemma"] if cfg.kind == "rmsnorm" else ["gemma"]
    for recipe in recipes:
        if gamma is None:
            break
        try:
            rr = check(x.contiguous(), y.contiguous(), gamma, beta, recipe=recipe, **common)
        except (ValueError, TypeError):
            continue
        if rr.recipe is not None and rr.recipe["pass"]:
            row.verdict, row.recipe = f"PASS (recipe {recipe})", f"recipe {recipe} (docs/cli.md \"Recipes\")"
            return


def _inputs_for(model, inputs):
    """The inputs in the model's floating dtype (a converted bf16 model is fed the same values, rounded once)."""
    p = next((p for p in model.parameters() if p.is_floating_point()), None)
    if p is None:
        return inputs
    return tuple(t.to(p.dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != p.dtype else t
                 for t in inputs)


def audit(model, *inputs):
    """Finds the model's norms, runs it once on inputs (floating inputs cast to the model's parameter dtype), gates
    each norm's output: an Audit (truthy when every norm passes; str() is the table)."""
    norms = find_norms(model)
    seen = _capture(model, _inputs_for(model, inputs), norms)
    rows = []
    for path, m, cfg in norms:
        x, y, calls = seen.get(path, (None, None, 0))
        if not cfg.normalized_shape and x is not None and x.dim() > 0:
            cfg.normalized_shape = (x.shape[-1],)  # no weight to say it: the last dim, as such a module normalizes
        row = AuditRow(path, cfg, calls=calls, x=x, y=y,
                       dtype=_DTYPES.get(x.dtype) if x is not None else None,
                       out_dtype=_DTYPES.get(y.dtype) if y is not None else None)
        _gate(row, m)
        rows.append(row)
    return Audit(rows)


@dataclass
class NormDiff:
    path: str
    changes: list  # what changed in this norm: "eps 1e-05 -> 1e-06", its output on the same input, ...; empty: nothing
    notes: list = field(default_factory=list)  # what it inherited: its input differs (a change upstream)

    def __str__(self):
        text = "; ".join(self.changes) if self.changes else "unchanged"
        return f"{self.path}: {text}" + (f" ({'; '.join(self.notes)})" if self.notes else "")


@dataclass
class Comparison:
    a: Audit
    b: Audit
    diffs: list  # NormDiff per norm path, in model A's order then B's new ones

    @property
    def changed(self):
        return [d for d in self.diffs if d.changes]

    def __str__(self):
        lines = ["model A", str(self.a), "", "model B", str(self.b), ""]
        if not self.changed:
            lines.append("no norm differs between A and B")
        else:
            lines.append(f"{len(self.changed)} of {len(self.diffs)} norms differ:")
            lines += [f"  {d}" for d in self.changed]
        inherited = [d for d in self.diffs if not d.changes and d.notes]
        if inherited:
            lines.append(f"{len(inherited)} unchanged but fed a different input (a change upstream):")
            lines += [f"  {d}" for d in inherited]
        return "\n".join(lines)


def _difference(what, a, b):
    """None when tensors a and b hold the same values (dtype aside), else a line saying how far apart they are."""
    if a is None or b is None:
        return None
    if tuple(a.shape) != tuple(b.shape):
        return f"{what} shape {tuple(a.shape)} -> {tuple(b.shape)}"
    da, db = a.double(), b.double()
    if torch.equal(da, db):
        return None
    diff = (da - db).abs()
    finite = torch.isfinite(diff)
    worst = diff[finite].max().item() if finite.any() else float("nan")
    scale = da.abs()[finite].max().item() if finite.any() else float("nan")
    return f"{what} differs: max |A - B| {worst:.3g} (|A| up to {scale:.3g}), {int((~finite).sum())} non-finite"


def compare(model_a, model_b, *inputs):
    """Audits both models on the same inputs and lists, per norm (matched by module path), what differs: its kind,
    normalized_shape, eps, affine parameters, dtypes, (1 + w) form, and its output, with each model's verdict."""
    a, b = audit(model_a, *inputs), audit(model_b, *inputs)
    rows_b = {r.path: r for r in b.rows}
    diffs = []
    for ra in a.rows:
        rb = rows_b.pop(ra.path, None)
        if rb is None:
            diffs.append(NormDiff(ra.path, [f"no norm at this path in B (A: {ra.config.text()})"]))
            continue
        ca, cb = ra.config, rb.config
        changes = []
        for name, va, vb in (("kind", ca.kind, cb.kind), ("normalized_shape", ca.normalized_shape, cb.normalized_shape),
                             ("eps", ca.eps, cb.eps), ("affine", ca.affine, cb.affine),
                             ("params", ca.param_dtype or "none", cb.param_dtype or "none"), ("input dtype", ra.dtype, rb.dtype),
                             ("output dtype", ra.out_dtype, rb.out_dtype), ("weight offset", ca.gamma_offset, cb.gamma_offset),
                             ("module", ca.module_class, cb.module_class)):
            if va != vb:
                changes.append(f"{name} {va} -> {vb}")
        notes = []
        # An output that differs because its input does is a change upstream, not this norm's: a note. Same input
        # values (a dtype change is a change of its own, above), different output: this norm computes differently.
        inp = _difference("input", ra.x, rb.x)
        out = _difference("output", ra.y, rb.y)
        if inp and not changes:
            notes += [inp + ": a change upstream", out] if out else [inp + ": a change upstream"]
        elif out:
            changes.append(out)
        if ra.verdict != rb.verdict:
            changes.append(f"verdict {ra.verdict} -> {rb.verdict}")
        diffs.append(NormDiff(ra.path, changes, [n for n in notes if n]))
    for rb in rows_b.values():
        diffs.append(NormDiff(rb.path, [f"a norm only in B ({rb.config.text()})"]))
    return Comparison(a, b, diffs)
