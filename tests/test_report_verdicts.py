#!/usr/bin/env python3
"""The precision report's Verdicts section, --baseline and the quantized plot, through reports/render.py alone.

Usage: test_report_verdicts.py [RENDER_PY [SCHEMA_JSON [WORK_DIR]]]   (ctest: report_verdicts)
   or: python3 -m pytest -q tests/test_report_verdicts.py

No lnorm binary: the test builds a small synthetic report.json (the shape `lnorm report` writes, checked against
reports/report.schema.json) with one kernel per verdict, renders it, and reads index.html back with html.parser:
  - the first section after the <h1> is "Verdicts", one table row per kernel in the implementations' order;
  - PASS (a LayerNorm cell far over 8 ulps but within 8 + kappa; a cautionary kernel that passes), FAIL (with its
    worst number and where; RMSNorm's flat budget of 8; a quantized row over 1 quantum), EXPECTED FAILURE (a
    cautionary kernel with non-finite mismatches), ERROR (naming the cell), NOT MEASURED (with the skip reason);
  - --baseline: a changed verdict is listed, the same report as baseline says "No change";
  - quantized_error.png is written when report["quantized"] has rows, and not otherwise.
Needs matplotlib (Debian: python3-matplotlib); exits 77 (skipped) without it.
"""
import copy
import html.parser
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
RENDER = os.path.join(HERE, "..", "reports", "render.py")
SCHEMA = os.path.join(HERE, "..", "reports", "report.schema.json")
EDGES = [0.0, 0.5] + [float(2 ** k) for k in range(0, 21)]
MACHINE = "box"
NO_GPU = "skipped: no CUDA device (cudaGetDeviceCount: no CUDA-capable device is detected)"

# Kernels in the order of report["implementations"], and the verdict each must get.
EXPECTED = [
    ("good", "PASS"),
    ("bad", "FAIL"),
    ("rms", "FAIL"),
    ("textbook", "EXPECTED FAILURE"),
    ("careful", "PASS"),
    ("broken", "ERROR"),
    ("gpu", "NOT MEASURED"),
    ("quanty", "FAIL"),
]
CAUTIONARY = {"textbook", "careful"}


def implementation(name):
    state = NO_GPU if name == "gpu" else "measured"
    ops = {op: {d: state if d == "f32" else f"skipped: {name} does not support dtype {d}" for d in ("f32", "f64")}
           for op in ("layernorm", "rmsnorm")}
    return {"name": name, "kind": "kernel", "summary": f"{name}: a synthetic kernel", "machine": MACHINE,
            "cautionary": name in CAUTIONARY, "algorithm": None, "bound_source": None, "dtypes": ops["layernorm"],
            "ops": ops}


def cell(impl, sweep, point, label, x, ulp, op="layernorm", kappa=1.0, nonfinite=0, status="ok", message=None):
    c = {"sweep": sweep, "op": op, "point": point, "label": label, "x": x, "dtype": "f32", "implementation": impl,
         "kind": "kernel", "machine": MACHINE, "rows": 8, "cols": 256, "eps": 1e-5,
         "case": f"f32 {sweep} {label} (synthetic)", "kappa_median": kappa, "kappa_max": kappa, "status": status}
    if status != "ok":
        c["message"] = message
        return c
    c.update({"elements": 2048, "max_ulp": None if nonfinite else ulp, "max_ulp_nonfinite": bool(nonfinite),
              "max_finite_ulp": ulp, "p999_ulp": min(ulp, 0.5), "correctly_rounded": 0.9,
              "nonfinite_mismatches": nonfinite, "nan_mismatches": nonfinite,
              "mean_max_ulp": None if op != "layernorm" else 0.0, "rstd_max_ulp": 0.0, "stat_nan_mismatches": 0,
              "bound_ulp": None})
    if op.endswith("_bwd"):
        c.update({"output": "dx", "dgamma_max_ulp": 0.5, "dgamma_max_finite_ulp": 0.5, "dgamma_correctly_rounded": 1.0,
                  "dgamma_nonfinite_mismatches": 0, "dgamma_elements": 256, "dbeta_max_ulp": 0.0,
                  "dbeta_max_finite_ulp": 0.0, "dbeta_correctly_rounded": 1.0, "dbeta_nonfinite_mismatches": 0,
                  "dbeta_elements": 256})
    return c


def width_cells(impl, worst_at_65536):
    return [cell(impl, "width", i, f"n={n}", float(n), u) for i, (n, u) in
            enumerate(((16, 0.5), (1024, 1.0), (65536, worst_at_65536)))]


def quant_row(impl, quant, max_quanta, nonfinite=0, op="layernorm"):
    return {"implementation": impl, "machine": MACHINE, "op": op, "dtype": "f32", "quant": quant, "input": "normal",
            "elements": 2048, "max_quanta": max_quanta, "correctly_rounded": 0.99, "saturated": 0,
            "nonfinite_mismatches": nonfinite, "scale_max": 0.0, "scale_unit": "f32 ulps"}


def summary_rows(cells):
    """One summary row per kernel × op × dtype, from its ok cells (the fields render.py reads)."""
    rows = {}
    for c in cells:
        if c["status"] != "ok" or c["op"].endswith("_bwd"):
            continue
        key = (c["implementation"], c["op"], c["dtype"])
        s = rows.setdefault(key, {"implementation": key[0], "kind": "kernel", "dtype": key[2], "op": key[1],
                                  "machine": MACHINE, "worst_cell": c["label"], "histogram": [0] * (len(EDGES) + 1),
                                  "elements": 0, "max_ulp": 0.0, "max_ulp_nonfinite": False, "max_finite_ulp": 0.0,
                                  "p999_ulp": 0.0, "correctly_rounded": 0.9, "nan_mismatches": 0,
                                  "nonfinite_mismatches": 0, "mean_max_ulp": 0.0 if key[1] == "layernorm" else None,
                                  "rstd_max_ulp": 0.0, "stat_nan_mismatches": 0})
        s["elements"] += c["elements"]
        s["histogram"][1] += c["elements"] - c["nonfinite_mismatches"]
        s["nonfinite_mismatches"] += c["nonfinite_mismatches"]
        s["nan_mismatches"] = s["nonfinite_mismatches"]
        if c["max_finite_ulp"] >= s["max_finite_ulp"]:
            s["max_finite_ulp"], s["worst_cell"] = c["max_finite_ulp"], c["label"]
        s["max_ulp"] = None if s["nonfinite_mismatches"] else s["max_finite_ulp"]
        s["max_ulp_nonfinite"] = bool(s["nonfinite_mismatches"])
        s["p999_ulp"] = max(s["p999_ulp"], c["p999_ulp"])
    return list(rows.values())


def synthetic_report(quantized=True):
    cells = []
    # good: within 8 everywhere but at kappa 1e3, where 500 ulps are inside 8 + 1·kappa; its backward at kappa 100
    # reads 50 (inside 8 + 100); the RMSNorm cell at 7.5 (inside the flat 8).
    cells += width_cells("good", 3.82)
    cells += [cell("good", "kappa", 0, "kappa≈1e0", 1.0, 0.6), cell("good", "kappa", 1, "kappa≈1e3", 1e3, 500.0, kappa=1e3),
              cell("good", "rmsnorm_width", 0, "n=16", 16.0, 7.5, op="rmsnorm", kappa=0.0),
              cell("good", "bwd_kappa", 0, "kappa≈1e2", 100.0, 50.0, op="layernorm_bwd", kappa=100.0)]
    # bad: 2e5 ulps at n=65536, kappa 1: over 8 + 1.
    cells += width_cells("bad", 2e5)
    # rms: 9 ulps in RMSNorm fails the flat 8 even where the cell's kappa_max is 100 (RMSNorm has no kappa term).
    cells += [cell("rms", "rmsnorm_width", 0, "n=16", 16.0, 9.0, op="rmsnorm", kappa=100.0),
              cell("rms", "rmsnorm_width", 1, "n=1024", 1024.0, 0.5, op="rmsnorm", kappa=100.0)]
    # textbook (cautionary): NaN on offset rows.
    cells += width_cells("textbook", 1.0) + [cell("textbook", "kappa", 0, "kappa≈1e3", 1e3, 3.0, kappa=1e3, nonfinite=77)]
    # careful (cautionary) passes.
    cells += width_cells("careful", 1.0)
    # broken: one cell could not be measured.
    cells += width_cells("broken", 1.0)[:2] + [cell("broken", "width", 2, "n=65536", 65536.0, 0, status="error",
                                                    message="the kernel wrote outside y")]
    # quanty: its cells pass; an fp8 row 1.5 quanta off fails, an fp4 row holds a non-finite mismatch.
    cells += width_cells("quanty", 0.5)
    quant = []
    for impl in ("good", "careful", "quanty"):
        for spec in ("fp8_e4m3/row", "int8/row", "fp4_e2m1/nvfp4"):
            quant.append(quant_row(impl, spec, 0.5000001))
    quant += [quant_row("quanty", "fp8_e4m3/tensor", 1.5), quant_row("quanty", "fp8_e5m2/group:128", None, nonfinite=3)]
    report = {
        "schema": "lnorm-report/1", "created": "2026-12-01T00:00:00Z",
        "machines": [{"label": MACHINE, "description": "a synthetic machine", "hostname": MACHINE,
                      "lnorm_version": "0.1.0", "created": "2026-12-01T00:00:00Z", "seed": 1, "quick": True,
                      "seconds": 1.0, "threads": 1}],
        "sweeps": [{"name": "kappa", "op": "layernorm", "title": "Error against conditioning (offset rows)",
                    "x_axis": "kappa", "log_x": True},
                   {"name": "width", "op": "layernorm", "title": "Error against row width", "x_axis": "row width n",
                    "log_x": True},
                   {"name": "rmsnorm_width", "op": "rmsnorm", "title": "RMSNorm: error against row width",
                    "x_axis": "row width n", "log_x": True},
                   {"name": "bwd_kappa", "op": "layernorm_bwd", "title": "Backward: dx's error against kappa",
                    "x_axis": "kappa", "log_x": True}],
        "histogram_edges": EDGES,
        "implementations": [implementation(name) for name, _ in EXPECTED],
        "cells": cells,
        "summary": summary_rows(cells),
    }
    if quantized:
        report["quantized"] = quant
    return report


def check_schema(report):
    try:
        import jsonschema
    except ImportError:  # the shape is still what render.py reads; the real report test checks the schema
        return
    with open(SCHEMA, encoding="utf-8") as f:
        jsonschema.validate(report, json.load(f))


def write_report(folder, report):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "report.json"), "w", encoding="utf-8") as f:
        json.dump(report, f)


def render(folder, *args):
    if importlib.util.find_spec("matplotlib") is None:  # under pytest; the ctest runner exits 77 first
        import pytest
        pytest.skip("render.py needs matplotlib (Debian: apt-get install python3-matplotlib)")
    r = subprocess.run([sys.executable, RENDER, folder, *args], capture_output=True, text=True)
    assert r.returncode == 0, f"render.py {folder} {args} exited {r.returncode}: {r.stderr}"


class Page(html.parser.HTMLParser):
    """index.html as a list of blocks: ("h1"|"h2"|"h3"|"p", text), ("ul", [item text]), ("table", rows of
    [(text, class)]), ("img", src)."""

    def __init__(self):
        super().__init__()
        self.blocks, self.text, self.tag, self.row, self.css = [], [], None, None, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("h1", "h2", "h3", "p", "li"):
            self.tag, self.text = tag, []
        elif tag in ("table", "ul"):
            self.blocks.append((tag, []))
        elif tag == "tr":
            self.row = []
        elif tag in ("td", "th"):
            self.tag, self.text, self.css = tag, [], attrs.get("class")
        elif tag == "img":
            self.blocks.append(("img", attrs.get("src")))

    def handle_endtag(self, tag):
        if tag in ("h1", "h2", "h3", "p") and self.tag == tag:
            if self.text:
                self.blocks.append((tag, "".join(self.text).strip()))
            self.tag = None
        elif tag == "li" and self.tag == "li":
            self.blocks[-1][1].append("".join(self.text).strip())
            self.tag = None
        elif tag in ("td", "th") and self.row is not None:
            self.row.append(("".join(self.text).strip(), self.css))
            self.tag = None
        elif tag == "tr" and self.row is not None:
            self.blocks[-1][1].append(self.row)
            self.row = None

    def handle_data(self, data):
        if self.tag:
            self.text.append(data)


def page(folder):
    p = Page()
    with open(os.path.join(folder, "index.html"), encoding="utf-8") as f:
        p.feed(f.read())
    return p.blocks


def section(blocks, title):
    """The blocks under the h2 `title`, up to the next h2."""
    start = blocks.index(("h2", title))
    end = next((i for i in range(start + 1, len(blocks)) if blocks[i][0] == "h2"), len(blocks))
    return blocks[start + 1:end]


def verdict_rows(blocks):
    table = next(b for b in section(blocks, "Verdicts") if b[0] == "table")[1]
    header = [t for t, _ in table[0]]
    assert header == ["kernel", "verdict", "worst", "where", "cells failed/cells"], header
    return {row[0][0]: {"verdict": row[1][0], "css": row[1][1], "worst": row[2][0], "where": row[3][0],
                        "count": row[4][0]} for row in table[1:]}, [row[0][0] for row in table[1:]]


# --- the tests -----------------------------------------------------------------------------------------------


def test_verdicts_come_first(tmp_path):
    folder = str(tmp_path / "report")
    report = synthetic_report()
    check_schema(report)
    write_report(folder, report)
    render(folder)
    blocks = page(folder)
    assert blocks[0] == ("h1", "lnorm precision report")
    assert blocks[1] == ("h2", "Verdicts"), f"the first section after the title is {blocks[1]}"
    rows, order = verdict_rows(blocks)
    assert order == [name for name, _ in EXPECTED], f"one row per kernel, in the implementations' order: {order}"
    for name, verdict in EXPECTED:
        assert rows[name]["verdict"] == verdict, f"{name}: {rows[name]}, expected {verdict}"
    css = {"PASS": "pass", "FAIL": "fail", "EXPECTED FAILURE": "expected", "ERROR": "error", "NOT MEASURED": "unmeasured"}
    assert all(rows[n]["css"] == css[v] for n, v in EXPECTED), "a verdict cell without its colour class"
    # The worst number and where.
    assert rows["good"]["worst"] == "max 500 scaled ulp" and rows["good"]["where"] == "LayerNorm f32 at kappa≈1e3", rows["good"]
    assert rows["bad"]["worst"].startswith("max 2.00e+05 scaled ulp > budget 9"), rows["bad"]
    assert rows["bad"]["where"] == "LayerNorm f32 at n=65536" and rows["bad"]["count"] == "1/3", rows["bad"]
    assert rows["rms"]["worst"] == "max 9 scaled ulp > budget 8" and rows["rms"]["where"] == "RMSNorm f32 at n=16", rows["rms"]
    assert "77 non-finite mismatches" in rows["textbook"]["worst"] and rows["textbook"]["where"] == "LayerNorm f32 at kappa≈1e3"
    assert "n=65536" in rows["broken"]["where"] and "the kernel wrote outside y" in rows["broken"]["where"], rows["broken"]
    assert "1 error" in rows["broken"]["count"], rows["broken"]
    assert rows["gpu"]["worst"] == "—" and rows["gpu"]["where"].startswith("no CUDA device"), rows["gpu"]
    assert rows["gpu"]["count"] == "0/0", rows["gpu"]
    # quanty fails on q: the non-finite row is its worst, and its count names the quantized rows.
    assert "non-finite mismatches in q" in rows["quanty"]["worst"], rows["quanty"]
    assert rows["quanty"]["where"] == "LayerNorm f32 → fp8_e5m2/group:128, normal rows", rows["quanty"]
    assert rows["quanty"]["count"] == "0/3 · quantized 2/5", rows["quanty"]
    # report.md leads with the same section, and the document ends with the plain regenerate hint.
    with open(os.path.join(folder, "report.md"), encoding="utf-8") as f:
        md = f.read()
    headings = [line for line in md.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Verdicts" and "## Findings" in headings, headings
    assert "| bad | FAIL | max 2.00e+05 scaled ulp > budget 9 | LayerNorm f32 at n=65536 | 1/3 |" in md
    assert "## Changes since the baseline" not in md
    assert "Regenerate: `lnorm report --out DIR`" in md


def test_baseline(tmp_path):
    new, old = str(tmp_path / "new"), str(tmp_path / "old")
    report = synthetic_report()
    write_report(new, report)
    # The baseline: bad passed (its worst 3 ulps), good's worst was 200 (now 500: moved > 10%), quanty's the same.
    was = copy.deepcopy(report)
    for c in was["cells"]:
        if c["implementation"] == "bad" and c["label"] == "n=65536":
            c["max_ulp"] = c["max_finite_ulp"] = 3.0
        if c["implementation"] == "good" and c["label"] == "kappa≈1e3":
            c["max_ulp"] = c["max_finite_ulp"] = 200.0
    write_report(old, was)
    render(new, "--baseline", old)  # a folder
    changes = section(page(new), "Changes since the baseline")
    lines = [t for b in changes if b[0] == "ul" for t in b[1]]
    # Only the two kernels that changed, each on its line.
    assert lines == ["bad: PASS → FAIL, worst 3 → 2.00e+05 scaled ulp (LayerNorm f32 at n=65536).",
                     "good: PASS, worst 200 → 500 scaled ulp (LayerNorm f32 at kappa≈1e3)."], lines
    blocks = page(new)
    h2 = [t for k, t in blocks if k == "h2"]
    assert h2[:3] == ["Verdicts", "Changes since the baseline", "Findings"], h2
    with open(os.path.join(new, "report.md"), encoding="utf-8") as f:
        md = f.read()
    assert "- **bad**: PASS → FAIL" in md and "--baseline OLD" in md
    # The same report as its own baseline (given as the file): no change.
    render(new, "--baseline", os.path.join(new, "report.json"))
    changes = section(page(new), "Changes since the baseline")
    assert any(k == "p" and t.startswith("No change") for k, t in changes), changes
    # A baseline that is not there: render.py says so and fails.
    r = subprocess.run([sys.executable, RENDER, new, "--baseline", str(tmp_path / "missing")], capture_output=True, text=True)
    assert r.returncode != 0 and "missing" in r.stderr, (r.returncode, r.stderr)


def test_quantized_plot(tmp_path):
    with_q, without_q = str(tmp_path / "q"), str(tmp_path / "no-q")
    write_report(with_q, synthetic_report(quantized=True))
    write_report(without_q, synthetic_report(quantized=False))
    render(with_q)
    render(without_q)
    path = os.path.join(with_q, "quantized_error.png")
    assert os.path.isfile(path), "quantized_error.png not written"
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    quantized = section(page(with_q), "Quantized outputs")
    assert ("img", "quantized_error.png") in quantized, quantized
    assert not os.path.exists(os.path.join(without_q, "quantized_error.png")), "a quantized plot without quantized rows"


# --- ctest: run without pytest -----------------------------------------------------------------------------------

if __name__ == "__main__":
    if len(sys.argv) > 1:
        RENDER = sys.argv[1]
    if len(sys.argv) > 2:
        SCHEMA = sys.argv[2]
    if importlib.util.find_spec("matplotlib") is None:  # render.py needs it
        print("skipped: no matplotlib (Debian: apt-get install python3-matplotlib)")
        sys.exit(77)
    import pathlib
    work = sys.argv[3] if len(sys.argv) > 3 else tempfile.mkdtemp(prefix="report_verdicts.")
    failures = 0
    for name, fn in [(n, f) for n, f in list(globals().items()) if n.startswith("test_") and callable(f)]:
        folder = pathlib.Path(work) / name
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        try:
            fn(folder)
            print("ok:", name)
        except Exception as e:  # an assertion, or the page not holding what the test looks for
            failures += 1
            print(f"FAIL: {name}: {type(e).__name__}: {e}")
    print(f"{failures} failures" if failures else "all verdict checks passed")
    sys.exit(1 if failures else 0)
