"""lnorm's pytest plugin (lnorm.pytest_plugin; registered by pip install as the pytest11 entry point `lnorm`): a
failing gate's message shows the worst element, its row's kappa, the budget and the `lnorm check` command that
reproduces it, and that command, run, fails the same way; --lnorm-report writes every gate of the session."""
import json
import os
import shlex
import subprocess
from importlib.metadata import entry_points
from pathlib import Path

import pytest

import lnorm
from lnorm import _cli

# The CLI: a pip install's own, or this build tree's (ctest's PYTHONPATH is <build>/python; the CLI <build>/cli/lnorm).
CLI = _cli.binary() or Path(os.environ.get("PYTHONPATH", "").split(os.pathsep)[0]).parent / "cli" / "lnorm"
# Registered by pip install (the pytest11 entry point): loaded without -p; a build tree needs -p.
INSTALLED = any(ep.name == "lnorm" for ep in entry_points(group="pytest11"))
PLUGIN_ARGS = [] if INSTALLED else ["-p", "lnorm.pytest_plugin"]

SUITE = '''
import numpy as np
import lnorm

def rows():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 64)).astype(np.float32)
    x[2] += 1000.0  # an offset row: kappa about 1000
    return x

def one_pass(x, eps=1e-5):  # E[x^2] - E[x]^2 in f32: cancels on the offset row
    m = x.mean(-1, keepdims=True, dtype=np.float32)
    v = (x * x).mean(-1, keepdims=True, dtype=np.float32) - m * m
    return ((x - m) / np.sqrt(v + np.float32(eps))).astype(np.float32)

def test_exact_passes(lnorm_gate):
    x = rows()
    y = lnorm.reference(x)[0]
    lnorm_gate.layernorm(x, y)
    lnorm_gate.rmsnorm(x, lnorm.reference(x, op="rmsnorm")[0])

def test_one_pass_fails(lnorm_gate):
    x = rows()
    lnorm_gate.layernorm(x, one_pass(x))

def test_quantized_and_backward(lnorm_gate):
    x = rows()
    q, s = lnorm.reference(x, quant="fp8_e4m3", scaling="row")
    lnorm_gate.quantized(x, q, quant="fp8_e4m3", scaling="row", scales=s)
    dy = np.ones_like(x)
    dx = lnorm.reference_backward(x, dy)[0]
    lnorm_gate.backward(x, dy, dx=dx)

def test_direct_assertion_is_recorded():
    x = rows()
    lnorm.assert_rmsnorm_close(x, (2 * lnorm.reference(x, op="rmsnorm")[0]).astype(np.float32))

def test_strategies_fixture(lnorm_strategies):
    assert hasattr(lnorm_strategies, "layernorm_inputs")
'''


@pytest.fixture
def session(pytester, monkeypatch):
    # The subprocess imports the lnorm this process imported (a relative PYTHONPATH would not survive its cwd).
    here = str(Path(lnorm.__file__).resolve().parent.parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([here] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    pytester.makepyfile(test_suite=SUITE)
    report = pytester.path / "out" / "gates.md"
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, f"--lnorm-report={report}",
                                           f"--lnorm-failures={pytester.path / 'fail'}")
    return result, report


def test_a_failing_gate_says_where_how_far_and_how_to_reproduce(session):
    result, _ = session
    result.assert_outcomes(passed=3, failed=2)
    out = result.stdout.str()
    assert "LayerNorm output over budget" in out and "FAIL  y max" in out
    assert "row kappa" in out          # the worst element's row's kappa
    assert "budget 8 + 1*kappa" in out  # the budget it was held to
    assert "over      y (2," in out    # the worst element over its allowance: the offset row
    # One command per failing test. pytest repeats the whole message in its short summary where the CI variable
    # is set (it does not truncate there), so the same command may be printed twice: count distinct ones.
    lines = list(dict.fromkeys(ln.split("reproduce ", 1)[1] for ln in out.splitlines() if "reproduce lnorm check" in ln))
    assert len(lines) == 2, out
    assert "--op rmsnorm" in lines[1] and "--max-ulp-per-kappa 0" in lines[1]
    if CLI.is_file():  # the command, run, gives the same verdict (exit 1: over budget)
        args = shlex.split(lines[0])
        run = subprocess.run([str(CLI)] + args[1:], capture_output=True, text=True)
        assert run.returncode == 1, run.stdout + run.stderr
        assert run.stdout.startswith("FAIL")


def test_the_report_holds_every_gate_of_the_session(session):
    _, report = session
    md = report.read_text()
    data = json.loads(report.with_suffix(".json").read_text())
    gates = data["gates"]
    assert [g["gate"] for g in gates] == ["layernorm", "rmsnorm", "layernorm", "quantized", "backward", "rmsnorm"]
    assert [g["verdict"] for g in gates] == ["PASS", "PASS", "FAIL", "PASS", "PASS", "FAIL"]
    fail = gates[2]
    assert fail["test"].endswith("test_one_pass_fails") and fail["reproduce"].startswith("lnorm check --x ")
    assert fail["where"][0] == 2 and fail["budget"] == "8 + 1*kappa scaled ulp"
    assert "6 gates, 4 passed, 2 failed." in md and "## Failures" in md


def test_a_backward_gate_reproduces_through_the_cli(tmp_path):
    """A wrong dbeta (zeros: the bf16 failure the gate once passed), its arrays saved as the plugin saves them, and
    the command it prints run: `lnorm check --dir bwd` needs a --beta beside --dbeta, which the gate supplies."""
    import numpy as np
    from lnorm import _gate

    seen = []
    _gate.OBSERVERS.append(seen.append)
    try:
        rng = np.random.default_rng(5)
        x = rng.standard_normal((16, 64)).astype(np.float32)
        dy = rng.standard_normal((16, 64)).astype(np.float32)
        g = (1 + 0.1 * rng.standard_normal(64)).astype(np.float32)
        dx, dgamma, dbeta = lnorm.reference_backward(x, dy, g)
        with pytest.raises(AssertionError, match="backward over budget"):
            lnorm.assert_backward_close(x, dy, g, dx=dx, dgamma=dgamma, dbeta=np.zeros_like(dbeta))
    finally:
        _gate.OBSERVERS.remove(seen.append)
    gate = seen[-1]
    files = {}
    for name, a in gate.arrays.items():
        files[name] = str(tmp_path / f"{name}.npy")
        np.save(files[name], a)
    cmd = gate.command(files)
    assert cmd.startswith("lnorm check --dir bwd") and "--beta" in cmd and "--dbeta" in cmd, cmd
    if CLI.is_file():
        run = subprocess.run([str(CLI)] + shlex.split(cmd)[1:], capture_output=True, text=True)
        assert run.returncode == 1 and "dbeta" in run.stdout, run.stdout + run.stderr
