#!/usr/bin/env python3
"""ctest for `lnorm report`: the report.json schema, the HTML's plots, --merge, --peer, --baseline and bad input.

Usage: test_report.py LNORM_EXE SCHEMA_JSON PEER_SCRIPT WORK_DIR PLUGIN_SO
Runs small reports (a few kernels and dtypes, quick sweeps) through the real executable.
"""
import json
import os
import re
import shutil
import subprocess
import sys

import jsonschema

LNORM, SCHEMA, PEER, WORK, PLUGIN = sys.argv[1:6]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def lnorm(*args):
    r = subprocess.run([LNORM, *args], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def check_report_dir(d, machines):
    with open(os.path.join(d, "report.json"), encoding="utf-8") as f:
        report = json.load(f)
    with open(SCHEMA, encoding="utf-8") as f:
        schema = json.load(f)
    try:
        jsonschema.validate(report, schema)
    except jsonschema.ValidationError as e:
        check(False, f"{d}/report.json violates the schema: {e.message} at {list(e.absolute_path)}")
    check(len(report["machines"]) == machines, f"{d}: {len(report['machines'])} machines, expected {machines}")
    labels = {m["label"] for m in report["machines"]}
    check(len(labels) == machines, f"{d}: machine labels not unique: {labels}")
    edges = report["histogram_edges"]
    for s in report["summary"]:
        check(s["machine"] in labels, f"summary names unknown machine {s['machine']}")
        check(len(s["histogram"]) == len(edges) + 1, "histogram length != edges + 1")
        check(sum(s["histogram"]) + s["nonfinite_mismatches"] == s["elements"],
              f"{s['implementation']} {s['dtype']}: histogram + non-finite mismatches != elements")
        check(s["op"] in ("layernorm", "rmsnorm", "layernorm_bwd", "rmsnorm_bwd"),
              f"summary row without an op: {s['implementation']} {s['dtype']}")
    sweep_op = {sw["name"]: sw["op"] for sw in report["sweeps"]}
    for c in report["cells"]:
        check(c["machine"] in labels, f"cell names unknown machine {c['machine']}")
        check(sweep_op.get(c["sweep"]) == c["op"], f"cell of sweep {c['sweep']} has op {c['op']}")
    ops = {c["op"] for c in report["cells"]}
    if "layernorm" in ops:
        check(any(c["sweep"] == "kappa" for c in report["cells"]), "no kappa cells")
    with open(os.path.join(d, "index.html"), encoding="utf-8") as f:
        page = f.read()
    images = re.findall(r"<img src='([^']+)'", page)
    if "layernorm" in ops:
        check("error_vs_kappa.png" in images, f"{d}/index.html does not show error_vs_kappa.png ({images})")
    if "rmsnorm" in ops:
        check("error_vs_rmsnorm_magnitude.png" in images, f"{d}/index.html does not show the RMSNorm magnitude plot")
    for img in images:
        path = os.path.join(d, img)
        check(os.path.isfile(path), f"{d}/index.html references {img}, which does not exist")
        if os.path.isfile(path):
            with open(path, "rb") as f:
                check(f.read(8) == b"\x89PNG\r\n\x1a\n", f"{img} is not a PNG")
    check(not re.search(r"(src|href)=['\"]https?://", page), "index.html loads something from the network")
    with open(os.path.join(d, "report.md"), encoding="utf-8") as f:
        md = f.read()
    check("## Findings" in md and "## Kernel × dtype" in md, "report.md lacks its Findings / Kernel × dtype sections")
    # The verdicts lead the document (tests/test_report_verdicts.py checks them in detail on a synthetic report).
    check(md.startswith("# lnorm precision report\n\n## Verdicts\n"), f"{d}/report.md does not open with its Verdicts")
    for impl in report["implementations"]:
        check(re.search(r"^\| " + re.escape(impl["name"]) + r"( @ [^|]+)? \| (PASS|FAIL|EXPECTED FAILURE|ERROR|NOT MEASURED) \|",
                        md, re.M), f"{d}/report.md has no verdict line for {impl['name']}")
    return report


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
a, b, merged, peer = (os.path.join(WORK, n) for n in ("a", "b", "merged", "peer"))

# One report (both ops, the default): the cautionary onepass must show its NaN on offset rows, welford
# none; onepass has no RMSNorm and is not measured for it.
rc, out, err = lnorm("report", "--quick", "--kernel", "welford", "--kernel", "onepass", "--dtype", "f32",
                     "--dtype", "bf16", "--label", "box-a", "--out", a)
check(rc == 0, f"report exited {rc}: {err}")
check(out.strip().endswith("report.md, numbers " + a + "/report.json)"), f"unexpected output: {out!r}")
if rc == 0:
    r = check_report_dir(a, 1)
    check({sw["name"] for sw in r["sweeps"]} == {"kappa", "width", "eps_over_var", "class", "rmsnorm_width",
                                                "rmsnorm_eps_over_ms", "rmsnorm_magnitude", "rmsnorm_class"},
          f"a default report does not hold both ops' sweeps: {[sw['name'] for sw in r['sweeps']]}")
    check(not any(s["implementation"] == "onepass" and s["op"] == "rmsnorm" for s in r["summary"]),
          "onepass, which has no RMSNorm, was measured as one")
    by = {(s["implementation"], s["dtype"]): s for s in r["summary"] if s["op"] == "layernorm"}
    check(by[("onepass", "f32")]["nonfinite_mismatches"] > 0, "onepass f32 shows no non-finite mismatch: the sweeps miss offset rows")
    check(by[("onepass", "f32")]["max_ulp"] is None and by[("onepass", "f32")]["max_ulp_nonfinite"],
          "onepass f32's max_ulp is not null beside its non-finite mismatches (it would read as a finite error)")
    check(by[("welford", "f32")]["nonfinite_mismatches"] == 0, "welford f32 has non-finite mismatches")
    check(by[("welford", "f32")]["max_ulp"] < 12, "welford f32 over its verify budget of 12 scaled ulps")
    # The quantized outputs: welford writes them (both ops, f32 and bf16 x, every spec and input), onepass does not.
    qz = r.get("quantized", [])
    check({(q["op"], q["dtype"]) for q in qz if q["implementation"] == "welford"} ==
          {(o, d) for o in ("layernorm", "rmsnorm") for d in ("f32", "bf16")}, "welford's quantized rows are missing")
    check(not any(q["implementation"] == "onepass" for q in qz), "onepass, which writes no q, has quantized rows")
    check(len({q["quant"] for q in qz}) == 8 and {q["input"] for q in qz} == {"normal", "heavy-tailed"},
          "the quantized rows do not cover the eight specs and two inputs")
    check(all(q["correctly_rounded"] > 0.99 and q["max_quanta"] is not None and q["max_quanta"] < 0.6 for q in qz),
          "a welford quantized row is far from the exact q")
    with open(os.path.join(a, "report.md"), encoding="utf-8") as f:
        check("## Quantized outputs" in f.read(), "report.md lacks its Quantized outputs section")
    for c in r["cells"]:
        if c["implementation"] == "welford" and isinstance(c["bound_ulp"], (int, float)):
            check(c["max_ulp"] <= c["bound_ulp"], f"welford over its bound at {c['label']} {c['dtype']}")

# RMSNorm alone: its sweeps only, no mean measured, no kappa; the textbook naive kernel (x² summed in
# the working format) loses rows whose squares leave f32's range, and the magnitude sweep must show it;
# welford (which rescales such rows) must not.
rms = os.path.join(WORK, "rms")
rc, out, err = lnorm("report", "--quick", "--op", "rmsnorm", "--kernel", "welford", "--kernel", "naive",
                     "--dtype", "f32", "--out", rms)
check(rc == 0, f"RMSNorm report exited {rc}: {err}")
if rc == 0:
    r = check_report_dir(rms, 1)
    check({c["op"] for c in r["cells"]} == {"rmsnorm"}, "an RMSNorm report holds LayerNorm cells")
    check(all(sw["op"] == "rmsnorm" for sw in r["sweeps"]), "an RMSNorm report lists LayerNorm's sweeps")
    check(all(c["mean_max_ulp"] is None for c in r["cells"] if c["status"] == "ok"), "a mean was measured for RMSNorm")
    mag = {(c["implementation"], c["label"]): c for c in r["cells"] if c["sweep"] == "rmsnorm_magnitude"}
    big = mag.get(("naive", "rms≈1e24"))
    check(big is not None and big["max_finite_ulp"] > 1e6,
          f"naive f32 at rms 1e24 (x² overflows f32): {big and big['max_finite_ulp']}, expected a huge error")
    check(all(c["max_ulp"] is not None and c["max_ulp"] < 10 for (k, _), c in mag.items() if k == "welford"),
          "welford f32 RMSNorm loses a row of the magnitude sweep")
    with open(os.path.join(rms, "report.md"), encoding="utf-8") as f:
        md = f.read()
    check("error depends on the row's magnitude" in md and "**naive f32**" in md,
          "report.md does not name naive's magnitude problem")

# The backward (--dir bwd): both ops' backward sweeps only, dx measured with dgamma and dbeta beside it. The
# textbook naive loses kappa ulps on offset rows (it takes the saved f32 mean as it is) and its dx grows with
# kappa; welford (careful, f64) stays correctly rounded but for ties, and the report names naive's growth.
bwd = os.path.join(WORK, "bwd")
rc, out, err = lnorm("report", "--quick", "--dir", "bwd", "--kernel", "welford", "--kernel", "naive", "--dtype", "f32", "--out", bwd)
check(rc == 0, f"backward report exited {rc}: {err}")
if rc == 0:
    r = check_report_dir(bwd, 1)
    check({c["op"] for c in r["cells"]} == {"layernorm_bwd", "rmsnorm_bwd"}, "a backward report holds forward cells")
    check({sw["name"] for sw in r["sweeps"]} == {"bwd_kappa", "bwd_width", "bwd_dy_scale", "bwd_class", "rmsnorm_bwd_width",
                                                "rmsnorm_bwd_magnitude", "rmsnorm_bwd_dy_scale", "rmsnorm_bwd_class"},
          f"a backward report's sweeps: {[sw['name'] for sw in r['sweeps']]}")
    ok = [c for c in r["cells"] if c["status"] == "ok"]
    check(ok and all(c["output"] == "dx" and c["dgamma_elements"] > 0 and c["dbeta_elements"] > 0 for c in ok),
          "backward cells without dx, dgamma and dbeta measured")
    by = {(s["implementation"], s["op"]): s for s in r["summary"]}
    check(by[("welford", "layernorm_bwd")]["max_ulp"] is not None and by[("welford", "layernorm_bwd")]["max_ulp"] <= 0.5 + 1e-9
          and by[("welford", "layernorm_bwd")]["dgamma_max_ulp"] <= 0.5 + 1e-9,
          f"welford's backward is not correctly rounded but for ties: {by[('welford', 'layernorm_bwd')]}")
    kappa = sorted((c for c in ok if c["sweep"] == "bwd_kappa" and c["implementation"] == "naive"), key=lambda c: c["x"])
    check(len(kappa) >= 2 and kappa[-1]["max_finite_ulp"] > 100 * max(kappa[0]["max_finite_ulp"], 1),
          f"naive's backward dx does not grow with kappa: {[(c['x'], c['max_finite_ulp']) for c in kappa]}")
    with open(os.path.join(bwd, "index.html"), encoding="utf-8") as f:
        page = f.read()
    check("error_vs_bwd_kappa.png" in page and "error_vs_rmsnorm_bwd_dy_scale.png" in page, "index.html lacks the backward plots")
    with open(os.path.join(bwd, "report.md"), encoding="utf-8") as f:
        md = f.read()
    check("dx's error grows with kappa" in md and "| dgamma max ulp |" in md, "report.md does not describe the backward")
rc, out, err = lnorm("report", "--quick", "--dir", "bwd", "--peer", "x=echo {y}", "--out", os.path.join(WORK, "bad-bwd"))
check(rc == 2 and "--dir bwd" in err, f"a peer with --dir bwd: exit {rc}, {err!r}")

# --merge of two machines' reports: both labels, every cell kept. b is rendered with a as its baseline: onepass,
# in a and not in b, is listed as gone.
rc, out, err = lnorm("report", "--quick", "--kernel", "welford", "--dtype", "f32", "--label", "box-b", "--out", b,
                     "--baseline", a)
check(rc == 0, f"second report exited {rc}: {err}")
if rc == 0:
    with open(os.path.join(b, "report.md"), encoding="utf-8") as f:
        md = f.read()
    check("## Changes since the baseline" in md and "- **onepass**: not in this report (was EXPECTED FAILURE" in md,
          "report --baseline: report.md does not list onepass as gone since the baseline")
rc, out, err = lnorm("report", "--merge", a + "/report.json", b + "/report.json", "--out", merged)
check(rc == 0, f"merge exited {rc}: {err}")
if rc == 0:
    m = check_report_dir(merged, 2)
    with open(a + "/report.json") as fa, open(b + "/report.json") as fb:
        n = len(json.load(fa)["cells"]) + len(json.load(fb)["cells"])
    check(len(m["cells"]) == n, f"merged report has {len(m['cells'])} cells, expected {n}")
    check({x["label"] for x in m["machines"]} == {"box-a", "box-b"}, "merged machine labels wrong")
# --out onto one of the merged reports' own folder: refused, that report untouched.
with open(a + "/report.json", "rb") as f:
    before = f.read()
rc, out, err = lnorm("report", "--merge", a + "/report.json", b + "/report.json", "--out", a, "--no-render")
check(rc == 2 and "is also an input" in err, f"merge onto an input's folder: exit {rc}, {err!r}")
with open(a + "/report.json", "rb") as f:
    check(f.read() == before, "merge onto an input's folder changed that report")

# A peer through the same metric.
cmd = (f"{sys.executable} {PEER} --x {{x}} --gamma {{gamma}} --beta {{beta}} --y {{y}} --mean {{mean}} "
       f"--rstd {{rstd}} --eps {{eps}} --dtype {{dtype}}")
rc, out, err = lnorm("report", "--quick", "--kernel", "welford", "--dtype", "f16", "--peer", "numpy=" + cmd, "--out", peer)
check(rc == 0, f"peer report exited {rc}: {err}")
if rc == 0:
    r = check_report_dir(peer, 1)
    s = [x for x in r["summary"] if x["implementation"] == "numpy"]
    check(len(s) == 1 and s[0]["kind"] == "peer" and s[0]["elements"] > 0, "the numpy peer was not measured")
    check(all(c["status"] == "ok" for c in r["cells"]), "a peer cell failed")

# A plugin's kernel beside ours (examples/plugin's two-pass f32 kernel): measured, no bound (lnorm
# does not know its algorithm).
plugged = os.path.join(WORK, "plugin")
rc, out, err = lnorm("report", "--quick", "--plugin", PLUGIN, "--kernel", "plugins", "--kernel", "welford",
                     "--dtype", "f32", "--out", plugged)
check(rc == 0, f"plugin report exited {rc}: {err}")
if rc == 0:
    r = check_report_dir(plugged, 1)
    s = [x for x in r["summary"] if x["implementation"] == "demo:two_pass"]
    check(len(s) == 1 and s[0]["kind"] == "kernel" and s[0]["elements"] > 0, "the plugin kernel was not measured")
    check(all(c["bound_ulp"] is None for c in r["cells"] if c["implementation"] == "demo:two_pass"),
          "a bound was printed for a plugin kernel whose algorithm lnorm cannot know")
    with open(os.path.join(plugged, "report.md"), encoding="utf-8") as f:
        check("| demo:two_pass |" in f.read(), "report.md has no row for the plugin kernel")

# Bad input: exit 2, one line naming the flag, nothing written.
bad = os.path.join(WORK, "bad")
notreport = os.path.join(WORK, "not-a-report.json")
with open(notreport, "w") as f:
    f.write('{"schema": "something-else"}')
# A copy of a's report (merged twice, every measurement would count twice), and a's with a value of the wrong kind.
copy_a, abc, negative = (os.path.join(WORK, n) for n in ("copy-a.json", "abc.json", "negative.json"))
with open(a + "/report.json", encoding="utf-8") as f:
    doc_a = json.load(f)
with open(copy_a, "w", encoding="utf-8") as f:
    json.dump(doc_a, f)
for path, key, value in ((abc, "max_ulp", "abc"), (negative, "cols", -1)):
    doc = json.loads(json.dumps(doc_a))
    next(c for c in doc["cells"] if c["status"] == "ok")[key] = value
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f)
for args, needle in (
    (["--merge", a + "/report.json", copy_a, "--out", bad], "the same report as"),
    (["--merge", a + "/report.json", a + "/report.json", "--out", bad], "the same report as"),
    (["--merge", abc, "--out", bad], "'max_ulp' is \"abc\""),
    (["--merge", negative, "--out", bad], "'cols' is -1"),
    (["--merge", notreport, "--out", bad], "--merge " + notreport),
    (["--merge", os.path.join(WORK, "missing.json"), "--out", bad], "cannot open"),
    (["--peer", "x=true", "--out", bad], "{y}"),
    (["--kernel", "nope", "--out", bad], "--kernel nope"),
    (["--dtype", "f8", "--out", bad], "--dtype f8"),
    (["--op", "groupnorm", "--out", bad], "--op groupnorm"),
    (["--dir", "sideways", "--out", bad], "--dir sideways"),
    (["--out", notreport], "exists and is not a folder"),
    (["--baseline", os.path.join(WORK, "missing"), "--out", bad], "--baseline " + os.path.join(WORK, "missing")),
    (["--baseline", WORK, "--out", bad], "the folder holds no report.json"),
    (["--baseline", notreport, "--out", bad], "not an lnorm report"),
    (["--baseline", a, "--no-render", "--out", bad], "--no-render"),
    (["--baseline", a, "--kernel", "welford", "--out", a], "this run replaces"),
):
    rc, out, err = lnorm("report", *args)
    check(rc == 2, f"report {args}: exit {rc}, expected 2")
    check(needle in err and err.count("\n") == 1, f"report {args}: message {err!r} lacks {needle!r}")
    check(not os.path.exists(os.path.join(bad, "report.json")), f"report {args} wrote a report")

print(f"{len(failures)} failures" if failures else "all report checks passed")
sys.exit(1 if failures else 0)
