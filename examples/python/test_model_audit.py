"""lnorm.torch on the example of model_audit.py: the audit finds every norm of the model with its configuration
and gates it; compare finds each planted conversion (eps, normalized_shape, affine, bf16, a fused replacement) in
the norm it touched, and nothing on an unchanged copy."""
import copy

import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed (scripts/install-deps.sh)")

import lnorm.torch  # noqa: E402

import model_audit as ex  # noqa: E402

NORMS = ["blocks.0.ln", "blocks.1.ln", "norm"]


def test_audit_finds_every_norm_with_its_configuration():
    a = lnorm.torch.audit(ex.model(), *ex.inputs())
    assert [r.path for r in a.rows] == NORMS
    ln, _, rms = a.rows
    assert (ln.config.kind, ln.config.normalized_shape, ln.config.eps, ln.config.affine) == \
        ("layernorm", (64,), 1e-5, "weight+bias")
    assert (rms.config.kind, rms.config.eps, rms.config.affine) == ("rmsnorm", 1e-6, "weight")
    # torch's LayerNorm in f32 is within the default budget; the f32 Llama RMSNorm is too (its cast is to f32).
    assert a, str(a)
    assert "blocks.0.ln" in str(a) and "PASS" in str(a)


def test_compare_finds_nothing_on_an_unchanged_copy():
    m = ex.model()
    c = lnorm.torch.compare(m, copy.deepcopy(m), *ex.inputs())
    assert c.changed == [], str(c)
    assert "no norm differs" in str(c)


@pytest.mark.parametrize("conversion,norms,words", [
    ("eps", ["blocks.0.ln", "blocks.1.ln"], "eps 1e-05 -> 1e-06"),
    ("shape", ["blocks.0.ln"], "normalized_shape (64,) -> (16, 64)"),
    ("affine", ["norm"], "affine weight -> none"),
    ("bf16", NORMS, "input dtype f32 -> bf16"),
    ("fused", ["blocks.0.ln"], "module LayerNorm -> OnePassLayerNorm"),
])
def test_compare_finds_each_planted_change(conversion, norms, words):
    m = ex.model()
    c = lnorm.torch.compare(m, ex.CONVERSIONS[conversion](m), *ex.inputs())
    touched = [d.path for d in c.changed if any(words in ch for ch in d.changes)]
    assert touched == norms, str(c)
    # Only the norms it touched: the ones after it see a different input (a note), not a change of their own.
    assert [d.path for d in c.changed] == norms, str(c)


def test_the_fused_one_pass_layernorm_fails_the_audit_where_it_cancels():
    base = lnorm.torch.audit(ex.model(), *ex.offset_inputs())
    fused = lnorm.torch.audit(ex.CONVERSIONS["fused"](ex.model()), *ex.offset_inputs())
    row = fused.rows[0]
    assert row.config.kind == "layernorm" and row.verdict == "FAIL", str(fused)
    assert "row kappa" in row.detail and row.kappa > 50  # the offset rows
    # torch's own f32 LayerNorm is over 8 + kappa there as well (a finding about torch 1.13, docs/python.md), but
    # within 3x of it; the one-pass variance is a hundred times further off.
    torch_ln = base.rows[0]
    assert torch_ln.worst < 3 * (8 + torch_ln.kappa), str(base)
    assert row.worst > 50 * torch_ln.worst, (str(base), str(fused))
