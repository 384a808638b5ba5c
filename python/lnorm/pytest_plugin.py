"""lnorm's pytest plugin: registered by `pip install` (the pytest11 entry point `lnorm`); from a build tree,
`pytest -p lnorm.pytest_plugin`.

Fixtures:
    lnorm_gate        the norm family's assertions (lnorm.assert_*_close) as methods: layernorm, rmsnorm, add_norm,
                      backward, quantized; each returns the result when it passes and fails the test with the
                      CLI's verdict otherwise
    lnorm_strategies  lnorm.strategies (Hypothesis): layernorm_inputs, rmsnorm_inputs

Every gate of the session (the fixture's and lnorm.assert_*_close called directly) is recorded. A failing one
saves its arrays (.npy) and its message ends with the `lnorm check` command that reproduces it.

Options:
    --lnorm-report PATH    write every gate as one report: PATH (markdown) and PATH with .json (the same rows)
    --lnorm-failures DIR   where a failing gate's arrays go (default: the session's temporary folder, lnorm-failures/)
"""
import json
import math
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest

from . import _asserts, _gate


def pytest_addoption(parser):
    group = parser.getgroup("lnorm", "lnorm: norm accuracy gates")
    group.addoption("--lnorm-report", metavar="PATH", default=None,
                    help="write every lnorm gate of the session to PATH (markdown) and PATH's .json twin")
    group.addoption("--lnorm-failures", metavar="DIR", default=None,
                    help="save a failing gate's arrays here (default: <basetemp>/lnorm-failures)")


class _Session:
    """The session's gates, in order, and where a failing gate's arrays go."""

    def __init__(self, config):
        self.config = config
        self.gates = []  # (test id, Gate)
        self.test = None
        self.default_dir = None

    def failures_dir(self):
        given = self.config.getoption("--lnorm-failures")
        if given:
            return Path(given)
        if self.default_dir is None:  # pytest's tmp_path_factory where it has one (the session's basetemp)
            factory = getattr(self.config, "_tmp_path_factory", None)
            self.default_dir = (Path(factory.getbasetemp()) if factory else Path(tempfile.mkdtemp(prefix="lnorm-")))
        return self.default_dir / "lnorm-failures"

    def observe(self, g):
        test = self.test or "(outside a test)"
        self.gates.append((test, g))
        if g.passed:
            return []
        folder = self.failures_dir() / f"{len(self.gates):03d}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', test)[-80:]}"
        folder.mkdir(parents=True, exist_ok=True)
        for name, a in g.arrays.items():
            path = folder / f"{name}.npy"
            np.save(path, a)
            g.files[name] = str(path)
        g.reproduce = g.command(g.files)
        return [f"  reproduce {g.reproduce}"]


_KEY = pytest.StashKey[_Session]()


def _session(config):
    return config.stash[_KEY]


def pytest_configure(config):
    s = _Session(config)
    config.stash[_KEY] = s
    _gate.OBSERVERS.append(s.observe)


def pytest_unconfigure(config):
    s = config.stash.get(_KEY, None)
    if s is not None and s.observe in _gate.OBSERVERS:
        _gate.OBSERVERS.remove(s.observe)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    s = _session(item.config)
    s.test = item.nodeid
    try:
        yield
    finally:
        s.test = None


class LnormGate:
    """The lnorm_gate fixture: lnorm's assertions by the name of what they gate."""

    layernorm = staticmethod(_asserts.assert_layernorm_close)
    rmsnorm = staticmethod(_asserts.assert_rmsnorm_close)
    add_norm = staticmethod(_asserts.assert_add_norm_close)
    backward = staticmethod(_asserts.assert_backward_close)
    quantized = staticmethod(_asserts.assert_quantized_close)


@pytest.fixture
def lnorm_gate():
    """lnorm's gates: lnorm_gate.layernorm(x, y, g, b, eps=...), .rmsnorm, .add_norm(x, residual, y, ...),
    .backward(x, dy, g, dx=..., dgamma=..., dbeta=...), .quantized(x, q, g, quant=..., scaling=..., scales=...)."""
    return LnormGate()


@pytest.fixture
def lnorm_strategies():
    """lnorm.strategies: Hypothesis strategies over the suite's input classes (needs Hypothesis)."""
    from . import strategies

    return strategies


def _number(v):
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else str(v)


def _row(test, g):
    worst, unit, where = g.worst()
    r = g.result
    return {"test": test, "gate": g.kind, "verdict": "PASS" if g.passed else "FAIL", "worst": _number(worst),
            "unit": unit, "where": list(where) if where is not None else None, "budget": g.budget_text(),
            "shape": list(getattr(r, "shape", ()) or ()), "dtype": getattr(r, "dtype", None),
            "options": {k: (v if isinstance(v, (str, int, float, bool)) else str(v)) for k, v in g.options.items()},
            "reproduce": g.reproduce, "verdict_text": str(r)}


def _markdown(rows):
    failed = sum(r["verdict"] == "FAIL" for r in rows)
    lines = ["# lnorm gates", "", f"{len(rows)} gates, {len(rows) - failed} passed, {failed} failed.", "",
             "| verdict | test | gate | shape | dtype | worst | budget |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        worst = r["worst"] if isinstance(r["worst"], str) else f"{r['worst']:.4g}"
        where = f" at {tuple(r['where'])}" if r["where"] else ""
        lines.append(f"| {r['verdict']} | `{r['test']}` | {r['gate']} | {tuple(r['shape'])} | {r['dtype']} | "
                     f"{worst} {r['unit']}{where} | {r['budget']} |")
    fails = [r for r in rows if r["verdict"] == "FAIL"]
    if fails:
        lines += ["", "## Failures", ""]
        for r in fails:
            lines += [f"### `{r['test']}` ({r['gate']})", "", "```", r["verdict_text"], "```", "",
                      f"Reproduce: `{r['reproduce']}`", ""]
    return "\n".join(lines) + "\n"


def _report_paths(path):
    """(markdown, json): PATH and its .json twin (PATH.json given: its .md twin)."""
    p = Path(path)
    return (p.with_suffix(".md"), p) if p.suffix == ".json" else (p, p.with_suffix(".json"))


def pytest_sessionfinish(session):
    path = session.config.getoption("--lnorm-report")
    if not path:
        return
    rows = [_row(t, g) for t, g in _session(session.config).gates]
    md, js = _report_paths(path)
    md.parent.mkdir(parents=True, exist_ok=True)
    md.write_text(_markdown(rows))
    js.write_text(json.dumps({"gates": rows}, indent=2) + "\n")


def pytest_terminal_summary(terminalreporter, config):
    path = config.getoption("--lnorm-report")
    gates = _session(config).gates
    if path and gates:
        failed = sum(not g.passed for _, g in gates)
        md, js = _report_paths(path)
        terminalreporter.write_line(f"lnorm: {len(gates)} gates, {failed} failed; report {md} and {js}")
