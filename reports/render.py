#!/usr/bin/env python3
"""Render an lnorm precision report (report.json) as report.md, index.html and PNG plots.

Usage: render.py DIR [--baseline OLD]
    reads DIR/report.json, writes DIR/report.md, DIR/index.html, DIR/*.png; with --baseline (an earlier
    report.json, or the folder holding one) the document also lists the kernels whose verdict or worst
    error changed since that report.

Everything shown comes from report.json alone, so a merged report (several machines) renders the same
way. `lnorm report` runs this script (compiled into the binary) after measuring; run it by hand to
re-render after editing it. Needs matplotlib (Debian: python3-matplotlib); the page needs no network.
"""
import html
import json
import math
import os
import sys

SCHEMA = "lnorm-report/1"
DTYPES = ["f32", "f64", "f16", "bf16"]
OPS = {"layernorm": "LayerNorm", "rmsnorm": "RMSNorm",  # the ops in lnorm's order, and their names
       "layernorm_bwd": "LayerNorm backward", "rmsnorm_bwd": "RMSNorm backward"}
BACKWARD = ("layernorm_bwd", "rmsnorm_bwd")  # their cells measure dx (max_ulp ...) with dgamma_* and dbeta_* beside it
FLOOR = 1e-2  # an error of exactly 0 is drawn here on log axes (and said so in the caption)


def load(path):
    """A report.json, given as the file or the folder holding it."""
    if os.path.isdir(path):
        path = os.path.join(path, "report.json")
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
    except OSError as e:
        sys.exit(f"render.py: {path}: cannot read ({e.strerror})")
    except ValueError as e:
        sys.exit(f"render.py: {path}: not JSON ({e})")
    if not isinstance(report, dict) or report.get("schema") != SCHEMA:
        sys.exit(f"render.py: {path}: schema {report.get('schema') if isinstance(report, dict) else None!r}, expected {SCHEMA!r}")
    return report


def op_of(item):
    """A cell's, summary row's or sweep's op (reports written before ops existed are LayerNorm's)."""
    return item.get("op", "layernorm")


def ops_in(report):
    present = {op_of(s) for s in report["summary"]} | {op_of(c) for c in report["cells"]}
    return [op for op in OPS if op in present]


def series_name(report, impl, machine, op=None):
    """impl [@ machine] [(op)]: the op only where the report holds more than one."""
    name = impl if len(report["machines"]) == 1 else f"{impl} @ {machine}"
    if op is not None and len(ops_in(report)) > 1:
        name += f" ({OPS.get(op, op)})"
    return name


def colour(report, impl, machine, op=None):
    """One colour per implementation × machine, the same in every plot and for every op (RMSNorm's series
    are dashed or hatched where both ops share a plot)."""
    keys = [(i["name"], i["machine"]) for i in report["implementations"]]
    k = keys.index((impl, machine)) if (impl, machine) in keys else len(keys)
    return f"C{k % 10}" if k < 10 else ["black", "gray", "olive", "navy", "teal"][k % 5]


def fmt_ulp(v):
    if v is None:
        return "—"
    if v == "unbounded":
        return "∞"
    if v == 0:
        return "0"
    if v >= 1e4:
        return f"{v:.2e}"
    return f"{v:.3g}"


def fmt_fraction(v):
    if v >= 0.99995 and v < 1:
        return f"{100 * v:.4f}%"
    return f"{100 * v:.2f}%"


# --- plots -----------------------------------------------------------------------------------------


def finite_max(c):
    """The worst scaled ulp error over the outputs without a non-finite mismatch (max_ulp itself is null
    where there is one). Reports written before max_finite_ulp existed carry it in max_ulp."""
    return c["max_finite_ulp"] if "max_finite_ulp" in c else c["max_ulp"]


def nonfinite(c):
    """Outputs that are NaN/Inf where the exact answer is finite, or the other way round
    (nan_mismatches: the deprecated name, in older reports)."""
    return c.get("nonfinite_mismatches", c.get("nan_mismatches", 0))


def fmt_max(c):
    """max_ulp as check reports it: infinite where any output is a non-finite mismatch."""
    return f"∞ ({fmt_ulp(finite_max(c))} finite)" if nonfinite(c) else fmt_ulp(finite_max(c))


def plot_sweep(report, sweep, folder, plt):
    cells = [c for c in report["cells"] if c["sweep"] == sweep["name"] and c["status"] == "ok" and c["x"] is not None]
    dtypes = [d for d in DTYPES if any(c["dtype"] == d for c in cells)]
    if not dtypes:
        return None
    fig, axes = plt.subplots(1, len(dtypes), figsize=(4.2 * len(dtypes), 3.8), squeeze=False)
    for ax, dtype in zip(axes[0], dtypes):
        keys = sorted({(c["implementation"], c["machine"]) for c in cells if c["dtype"] == dtype},
                      key=lambda k: (k[1], k[0]))
        # f64's magnitude sweep spans 1e-300 .. 1e300, past what matplotlib's log axis can draw (its
        # margins and ticks leave the double range): that panel plots log10(x) on a linear axis.
        spread = [c["x"] for c in cells if c["dtype"] == dtype and c["x"] > 0]
        decades = sweep["log_x"] and bool(spread) and (min(spread) < 1e-250 or max(spread) > 1e250)
        at = (lambda v: math.log10(v) if v > 0 else float("nan")) if decades else (lambda v: v)
        for impl, machine in keys:
            pts = sorted((c for c in cells if c["dtype"] == dtype and c["implementation"] == impl
                          and c["machine"] == machine and c["x"] is not None), key=lambda c: c["x"])
            if not pts:
                continue
            xs = [at(c["x"]) for c in pts]
            ys = [max(finite_max(c), FLOOR) for c in pts]
            (line,) = ax.plot(xs, ys, marker="o", markersize=3, label=series_name(report, impl, machine),
                              color=colour(report, impl, machine))
            bad = [(at(c["x"]), max(finite_max(c), FLOOR)) for c in pts if nonfinite(c)]
            if bad:
                ax.scatter([b[0] for b in bad], [b[1] for b in bad], marker="x", s=60, color="red", zorder=5)
            bounds = [(at(c["x"]), c["bound_ulp"]) for c in pts if isinstance(c["bound_ulp"], (int, float))]
            if bounds:
                ax.plot([b[0] for b in bounds], [b[1] for b in bounds], linestyle=":", linewidth=1,
                        color=line.get_color())
        ax.set_xscale("log" if sweep["log_x"] and not decades else "linear")
        ax.set_yscale("log")
        ax.set_title(dtype)
        ax.set_xlabel(f"log10({sweep['x_axis']})" if decades else sweep["x_axis"])
        ax.grid(True, which="major", alpha=0.3)
    axes[0][0].set_ylabel("max scaled ulp error of dx (log)" if op_of(sweep) in BACKWARD else "max scaled ulp error (log)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    for ax in axes[0][1:]:
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in labels:
                handles.append(h)
                labels.append(l)
    fig.legend(handles, labels, loc="lower center", ncol=min(6, len(labels)), fontsize=8, frameon=False)
    drew_bound = any(isinstance(c["bound_ulp"], (int, float)) for c in cells)
    fig.suptitle(sweep["title"] + ("  (dotted: the algorithm's worst-case bound; " if drew_bound else "  (")
                 + "red x: non-finite mismatches)", fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 0.95))
    name = f"error_vs_{sweep['name']}.png"
    fig.savefig(os.path.join(folder, name), dpi=110)
    plt.close(fig)
    return name


def plot_histograms(report, folder, plt):
    edges = report["histogram_edges"]
    labels = ["0", "≤½"] + [f"≤{e:g}" if e < 1024 else f"≤2^{int(math.log2(e))}" for e in edges[2:]] + [">2^20"]
    rows = report["summary"]
    dtypes = [d for d in DTYPES if any(s["dtype"] == d for s in rows)]
    if not dtypes:
        return None
    fig, axes = plt.subplots(1, len(dtypes), figsize=(4.2 * len(dtypes), 3.8), squeeze=False)
    for ax, dtype in zip(axes[0], dtypes):
        for s in (s for s in rows if s["dtype"] == dtype):
            total = max(1, sum(s["histogram"]))
            frac = [h / total for h in s["histogram"]]
            last = max((i for i, h in enumerate(s["histogram"]) if h), default=0)
            ax.step(range(last + 1), frac[: last + 1], where="mid",
                    linestyle="--" if op_of(s) == "rmsnorm" else "-",
                    label=series_name(report, s["implementation"], s["machine"], op_of(s)),
                    color=colour(report, s["implementation"], s["machine"], op_of(s)))
        ax.set_yscale("log")
        ax.set_ylim(bottom=1e-7)
        ax.set_title(dtype)
        ticks = list(range(0, len(labels), 2))
        ax.set_xticks(ticks)
        ax.set_xticklabels([labels[i] for i in ticks], rotation=60, fontsize=7)
        ax.set_xlabel("scaled ulp error bin")
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("fraction of elements")
    shared_legend(fig, axes)
    fig.suptitle("Distribution of scaled ulp errors, all sweeps together", fontsize=10)
    fig.tight_layout(rect=(0, 0.1, 1, 0.95))
    fig.savefig(os.path.join(folder, "error_histograms.png"), dpi=110)
    plt.close(fig)
    return "error_histograms.png"


def plot_correctly_rounded(report, folder, plt):
    rows = report["summary"]
    if not rows:
        return None
    series = sorted({(s["implementation"], s["machine"], op_of(s)) for s in rows},
                    key=lambda k: (k[1], k[0], list(OPS).index(k[2]) if k[2] in OPS else 9))
    dtypes = [d for d in DTYPES if any(s["dtype"] == d for s in rows)]
    width = 0.8 / max(1, len(series))
    fig, ax = plt.subplots(figsize=(8 if len(series) <= 8 else 12, 3.8))
    for i, (impl, machine, op) in enumerate(series):
        vals = []
        for d in dtypes:
            hit = [s for s in rows if s["implementation"] == impl and s["machine"] == machine and s["dtype"] == d
                   and op_of(s) == op]
            vals.append(100 * hit[0]["correctly_rounded"] if hit else 0)
        ax.bar([j + i * width for j in range(len(dtypes))], vals, width, label=series_name(report, impl, machine, op),
               color=colour(report, impl, machine, op), hatch="//" if op == "rmsnorm" else None)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(dtypes))])
    ax.set_xticklabels(dtypes)
    ax.set_ylabel("correctly rounded elements (%)")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=8, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.1), frameon=False)
    ax.set_title("Correctly rounded fraction per kernel × dtype (all sweeps; hatched: RMSNorm)", fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(folder, "correctly_rounded.png"), dpi=110)
    plt.close(fig)
    return "correctly_rounded.png"


def plot_quantized(report, folder, plt):
    """q's worst error in quanta by format/scaling, one panel per x dtype, one marker and colour per kernel
    (the worst over the ops and inputs); dashed at 0.5 (correct rounding) and at 1 (the verdicts' limit)."""
    rows = report.get("quantized", [])
    if not rows:
        return None
    dtypes = [d for d in DTYPES if any(q["dtype"] == d for q in rows)]
    specs = list(dict.fromkeys(q["quant"] for q in rows))  # the report's order
    keys = [k for k in kernel_keys(report) if any((q["implementation"], q["machine"]) == k for q in rows)]
    worst = {}  # (impl, machine, dtype, quant) -> max quanta over ops and inputs; inf: a non-finite mismatch
    for q in rows:
        v = math.inf if q["max_quanta"] is None or q["nonfinite_mismatches"] else q["max_quanta"]
        k = (q["implementation"], q["machine"], q["dtype"], q["quant"])
        worst[k] = max(worst.get(k, 0.0), v)
    finite = [v for v in worst.values() if math.isfinite(v)]
    top = max(finite + [BUDGET_QUANTA])
    log = top > 4  # a kernel far out: log axis (0 drawn at FLOOR); else linear, where 0.5 and 1 read plainly
    ceiling = top * 3 if log else top * 1.15  # where a non-finite mismatch is drawn
    markers = "osD^vP*Xh<>p"
    fig, axes = plt.subplots(1, len(dtypes), figsize=(max(4.2 * len(dtypes), 7), 3.8), squeeze=False, sharey=True)
    width = 0.7 / max(1, len(keys))
    for ax, dtype in zip(axes[0], dtypes):
        for i, (impl, machine) in enumerate(keys):
            pts = [(j + (i - (len(keys) - 1) / 2) * width, worst[(impl, machine, dtype, spec)])
                   for j, spec in enumerate(specs) if (impl, machine, dtype, spec) in worst]
            if not pts:
                continue
            ok = [(x, max(v, FLOOR) if log else v) for x, v in pts if math.isfinite(v)]
            ax.scatter([p[0] for p in ok], [p[1] for p in ok], marker=markers[i % len(markers)], s=22,
                       color=colour(report, impl, machine), label=series_name(report, impl, machine), zorder=3)
            bad = [x for x, v in pts if not math.isfinite(v)]
            if bad:
                ax.scatter(bad, [ceiling] * len(bad), marker="x", s=60, color="red", zorder=5)
        ax.axhline(0.5, linestyle="--", linewidth=1, color="tab:green")
        ax.axhline(BUDGET_QUANTA, linestyle="--", linewidth=1, color="tab:red")
        if log:
            ax.set_yscale("log")
            ax.set_ylim(FLOOR / 2, ceiling * 2)
        else:
            ax.set_ylim(0, ceiling * 1.05)
        ax.set_xticks(range(len(specs)))
        ax.set_xticklabels(specs, rotation=45, fontsize=7, ha="right", rotation_mode="anchor")
        ax.set_xlim(-0.6, len(specs) - 0.4)
        ax.set_title(dtype)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0][0].set_ylabel("max error of q in quanta" + (" (log)" if log else ""))
    shared_legend(fig, axes)
    fig.suptitle("Quantized outputs: q's worst error over ops and inputs\n(dashed: 0.5 = correct rounding, 1 = the "
                 "verdicts' limit" + ("; red x: non-finite mismatches)" if any(math.isinf(v) for v in worst.values())
                                     else ")"), fontsize=9)
    fig.tight_layout(rect=(0, 0.08, 1, 0.93))
    fig.savefig(os.path.join(folder, "quantized_error.png"), dpi=110)
    plt.close(fig)
    return "quantized_error.png"


# --- verdicts ------------------------------------------------------------------------------------------

BUDGET_ULP, BUDGET_PER_KAPPA = 8.0, 1.0  # `lnorm check`'s default budget: --max-ulp 8, --max-ulp-per-kappa 1
BUDGET_QUANTA = 1.0  # a quantized output's limit: one quantum from y*/s (a correct rounding is within 0.5)
MOVED = 0.10  # --baseline lists a kernel whose worst number moved by more than this fraction


class Styled(str):
    """A table cell's text with a CSS class for index.html (report.md shows the text alone)."""

    def __new__(cls, text, css):
        cell = super().__new__(cls, text)
        cell.css = css
        return cell


def cell_budget(c):
    """The scaled ulps `lnorm check` allows by default, at the cell's largest row kappa: 8 for RMSNorm (no
    kappa), 8 + 1·kappa for LayerNorm and the backward ops (kappa 0 where the cell has none)."""
    if op_of(c) == "rmsnorm":
        return BUDGET_ULP
    kappa = c.get("kappa_max")
    kappa = kappa if isinstance(kappa, (int, float)) and math.isfinite(kappa) else 0.0
    return BUDGET_ULP + BUDGET_PER_KAPPA * kappa


def cell_fails(c):
    return nonfinite(c) > 0 or (finite_max(c) or 0) > cell_budget(c)


def quant_fails(q):
    return q["nonfinite_mismatches"] > 0 or q["max_quanta"] is None or q["max_quanta"] > BUDGET_QUANTA


def kernel_keys(report):
    """(implementation, machine) in report["implementations"] order, then any that only cells name."""
    keys = [(i["name"], i["machine"]) for i in report["implementations"]]
    for item in report["cells"] + report.get("quantized", []):
        if (item["implementation"], item["machine"]) not in keys:
            keys.append((item["implementation"], item["machine"]))
    return keys


def where_of(report, item):
    op = OPS.get(op_of(item), op_of(item))
    if "quant" in item:  # a quantized row
        return f"{op} {item['dtype']} → {item['quant']}, {item['input']} rows"
    return f"{op} {item['dtype']} at {item['label']}"


def skip_reason(impl):
    """Why a kernel measured nothing: its skip reasons, those that say more than 'does not support' first."""
    reasons = []
    for states in impl.get("ops", {"layernorm": impl.get("dtypes", {})}).values():
        for state in states.values():
            if state.startswith("skipped: ") and state[len("skipped: "):] not in reasons:
                reasons.append(state[len("skipped: "):])
    telling = [r for r in reasons if "does not support dtype" not in r and "does not implement" not in r]
    reasons = telling or reasons
    return "; ".join(reasons[:2]) + ("; …" if len(reasons) > 2 else "") if reasons else "no cell measured"


def verdicts(report):
    """One dict per kernel (implementation × machine): verdict, worst (value, unit, text, where), counts."""
    cautionary = {(i["name"], i["machine"]): bool(i.get("cautionary")) for i in report["implementations"]}
    impls = {(i["name"], i["machine"]): i for i in report["implementations"]}
    out = []
    for key in kernel_keys(report):
        mine = lambda item: (item["implementation"], item["machine"]) == key  # noqa: E731
        cells = [c for c in report["cells"] if mine(c) and c["status"] == "ok"]
        errors = [c for c in report["cells"] if mine(c) and c["status"] != "ok"]
        quant = [q for q in report.get("quantized", []) if mine(q)]
        items = []  # (rank, value, unit, text, where); rank: (failed, non-finite mismatches, a cell, finite value)
        for c in cells:
            failed, v, bad = cell_fails(c), finite_max(c) or 0, nonfinite(c)
            of = " of dx" if op_of(c) in BACKWARD else ""
            if bad:
                text = f"∞: {bad} non-finite mismatches" + (f" (max finite {fmt_ulp(v)} scaled ulp{of})" if v else "")
            else:
                text = f"max {fmt_ulp(v)} scaled ulp{of}" + (f" > budget {fmt_ulp(cell_budget(c))}" if failed else "")
            items.append(((failed, bad, True, v), math.inf if bad else v, "scaled ulp", text, where_of(report, c)))
        for q in quant:
            failed, v, bad = quant_fails(q), q["max_quanta"], q["nonfinite_mismatches"]
            if bad or v is None:
                text = f"∞: {bad} non-finite mismatches in q"
            else:
                text = f"max {fmt_ulp(v)} quanta" + (" > 1" if failed else "")
            items.append(((failed, bad or v is None, False, v or 0), math.inf if bad or v is None else v, "quanta", text,
                          where_of(report, q)))
        v = {"key": key, "name": series_name(report, *key), "cells": len(cells), "cells_failed": sum(cell_fails(c) for c in cells),
             "quantized": len(quant), "quantized_failed": sum(quant_fails(q) for q in quant), "errors": len(errors),
             "value": None, "unit": None, "worst": "—", "where": ""}
        if items:
            # The worst: a failing measurement if any (the most non-finite mismatches first), else the largest
            # error; cells before quantized rows.
            _, v["value"], v["unit"], v["worst"], v["where"] = max(items, key=lambda t: t[0])
        if v["cells_failed"] or v["quantized_failed"]:
            v["verdict"] = "EXPECTED FAILURE" if cautionary.get(key) else "FAIL"
        elif errors:
            v["verdict"] = "ERROR"
            e = errors[0]
            v["where"] = (v["where"] + "; " if v["where"] else "") + (
                f"error at {where_of(report, e)}: {e.get('message', 'no message')}"
                + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""))
        elif not items:
            v["verdict"] = "NOT MEASURED"
            v["where"] = skip_reason(impls[key]) if key in impls else "no cell measured"
        else:
            v["verdict"] = "PASS"
        out.append(v)
    return out


VERDICT_CSS = {"PASS": "pass", "FAIL": "fail", "EXPECTED FAILURE": "expected", "ERROR": "error", "NOT MEASURED": "unmeasured"}


def verdict_table(report, rows):
    header = ["kernel", "verdict", "worst", "where", "cells failed/cells"]
    body = []
    for v in rows:
        count = f"{v['cells_failed']}/{v['cells']}"
        if v["quantized"]:
            count += f" · quantized {v['quantized_failed']}/{v['quantized']}"
        if v["errors"]:
            count += f" · {v['errors']} error{'s' if v['errors'] > 1 else ''}"
        body.append([v["name"], Styled(v["verdict"], VERDICT_CSS[v["verdict"]]), v["worst"], v["where"], count])
    return header, body, "verdicts"  # the HTML table's class: text, left-aligned


VERDICTS_LEAD = "One line per kernel: does it pass `lnorm check`'s default budget on every cell of this report?"
VERDICTS_RULE = (
    "A cell fails on any non-finite mismatch (NaN/Inf where the exact answer is finite, or the other way round) or "
    "when its max scaled ulp error exceeds 8 + 1·kappa (LayerNorm, the backward's dx; kappa: the cell's largest row "
    "kappa, so a little more lenient than check's per-row budget) or 8 (RMSNorm). A quantized output fails on a "
    "non-finite mismatch or more than 1 quantum from y*/s (a correct rounding is within 0.5; a kernel that quantizes "
    "its own f32 y reads a little over 0.5 near midpoints). EXPECTED FAILURE: a cautionary kernel (wrong on purpose) "
    "that fails; ERROR: a cell could not be measured and nothing fails; NOT MEASURED: everything skipped, with the "
    "reason. worst: the failing measurement furthest out (non-finite mismatches first), else the largest error.")


def fmt_worst_number(v):
    if v is None or v["value"] is None:
        return "—"
    if math.isinf(v["value"]):
        return "∞"
    return f"{fmt_ulp(v['value'])} {v['unit']}"


def moved(old, new):
    """Whether a kernel's worst number moved by more than MOVED (or appeared, or disappeared)."""
    a, b = old["value"], new["value"]
    if a is None or b is None:
        return (a is None) != (b is None)
    if old["unit"] != new["unit"] or math.isinf(a) or math.isinf(b):
        return old["unit"] != new["unit"] or math.isinf(a) != math.isinf(b)
    return abs(b - a) > MOVED * abs(a) if a else b != 0


def changes(report, baseline):
    """The --baseline lines: kernels whose verdict changed (first), or whose worst number moved by more than 10%
    (then), each group in the kernels' order. Kernels are matched by implementation and machine; by implementation
    alone where both reports hold one machine each (a re-run on a machine whose label changed is the same kernel)."""
    by_name = len(report["machines"]) == 1 and len(baseline["machines"]) == 1
    ident = (lambda v: v["key"][0]) if by_name else (lambda v: v["key"])
    now = verdicts(report)
    was = {ident(v): v for v in verdicts(baseline)}
    out, moves = [], []
    for v in now:
        w = was.pop(ident(v), None)
        if w is None:
            out.append(f"**{v['name']}**: new — {v['verdict']}" + (f": {v['where']}" if v["value"] is None else
                                                                     f", worst {v['worst']}, in {v['where']}") + ".")
            continue
        if w["verdict"] == v["verdict"] and not moved(w, v):
            continue
        verdict = v["verdict"] if w["verdict"] == v["verdict"] else f"{w['verdict']} → {v['verdict']}"
        if w["unit"] == v["unit"] and v["unit"] and not (math.isinf(v["value"]) or math.isinf(w["value"])):
            worst = f"{fmt_ulp(w['value'])} → {fmt_ulp(v['value'])} {v['unit']}"
        else:
            worst = f"{fmt_worst_number(w)} → {fmt_worst_number(v)}"
        where = v["where"] or w["where"]
        if w["where"] and v["where"] and w["where"] != v["where"]:
            where = f"{v['where']}; was at {w['where']}"
        (moves if w["verdict"] == v["verdict"] else out).append(
            f"**{v['name']}**: {verdict}, worst {worst}" + (f" ({where})" if where else "") + ".")
    for w in was.values():
        out.append(f"**{w['name']}**: not in this report (was {w['verdict']}"
                   + (f", worst {w['worst']}, in {w['where']}" if w["value"] is not None else "") + ").")
    return out + moves


def baseline_blocks(report, baseline, baseline_path):
    made = ", ".join(f"{m['label']} {m['created']}" for m in baseline["machines"])
    b = [("h2", "Changes since the baseline"),
         ("p", f"Baseline: `{baseline_path}` ({made}). Listed: each kernel whose verdict changed, or whose worst number "
               f"moved by more than {100 * MOVED:.0f}% (or appeared or disappeared).")]
    lines = changes(report, baseline)
    b.append(("ul", lines) if lines else ("p", "No change: every kernel's verdict is the baseline's, and its worst "
                                               f"number within {100 * MOVED:.0f}% of it."))
    return b


# --- findings and tables ---------------------------------------------------------------------------


def findings(report):
    out = []
    cells = [c for c in report["cells"] if c["status"] == "ok"]
    cautionary = {(i["name"], i["machine"]) for i in report["implementations"] if i.get("cautionary")}
    several_ops = len(ops_in(report)) > 1
    for op, dtype in ((op, d) for op in ops_in(report) for d in DTYPES):
        head = f"{OPS.get(op, op)} {dtype}" if several_ops else dtype
        rows = [s for s in report["summary"] if s["dtype"] == dtype and op_of(s) == op]
        fair = [s for s in rows if (s["implementation"], s["machine"]) not in cautionary and not nonfinite(s)]
        if len(fair) >= 2:
            best = min(fair, key=finite_max)
            worst = max(fair, key=finite_max)
            if fmt_ulp(finite_max(worst)) == fmt_ulp(finite_max(best)):
                out.append(f"**{head}**: all {len(fair)} implementations without non-finite mismatches within {fmt_ulp(finite_max(worst))} scaled "
                           f"ulp; correctly rounded from {fmt_fraction(min(s['correctly_rounded'] for s in fair))} "
                           f"to {fmt_fraction(max(s['correctly_rounded'] for s in fair))}.")
                continue
            out.append(f"**{head}** (implementations without non-finite mismatches): most exact {series_name(report, best['implementation'], best['machine'])} "
                       f"(max {fmt_ulp(finite_max(best))} scaled ulp, {fmt_fraction(best['correctly_rounded'])} "
                       f"correctly rounded); least exact {series_name(report, worst['implementation'], worst['machine'])} "
                       f"(max {fmt_ulp(finite_max(worst))}, at {worst['worst_cell']}).")
    for s in report["summary"]:
        if nonfinite(s):
            where = sorted({c["label"] for c in cells if c["implementation"] == s["implementation"]
                            and c["machine"] == s["machine"] and c["dtype"] == s["dtype"] and op_of(c) == op_of(s)
                            and nonfinite(c)})
            out.append(f"**{series_name(report, s['implementation'], s['machine'], op_of(s))} {s['dtype']}**: "
                       f"{nonfinite(s)} non-finite mismatches, NaN/Inf where the exact answer is finite or the other way round ({', '.join(where[:4])}"
                       f"{', …' if len(where) > 4 else ''}).")
    for s in (s for s in report["summary"] if op_of(s) in ("layernorm", "layernorm_bwd")):
        kappa_sweep = "kappa" if op_of(s) == "layernorm" else "bwd_kappa"
        pts = sorted((c for c in cells if c["sweep"] == kappa_sweep and c["implementation"] == s["implementation"]
                      and c["machine"] == s["machine"] and c["dtype"] == s["dtype"] and c["x"] is not None),
                     key=lambda c: c["x"])
        if len(pts) >= 2 and finite_max(pts[-1]) > 10 * max(finite_max(pts[0]), 1):
            what = "dx's error" if op_of(s) in BACKWARD else "error"
            out.append(f"**{series_name(report, s['implementation'], s['machine'], op_of(s))} {s['dtype']}**: {what} grows "
                       f"with kappa — {fmt_ulp(finite_max(pts[0]))} at kappa {pts[0]['x']:.3g}, "
                       f"{fmt_ulp(finite_max(pts[-1]))} at kappa {pts[-1]['x']:.3g}.")
    # RMSNorm's conditioning is range: a kernel that squares x in its working format loses rows whose x²
    # overflows or underflows it, whatever its rounding.
    for s in (s for s in report["summary"] if op_of(s) == "rmsnorm"):
        pts = sorted((c for c in cells if c["sweep"] == "rmsnorm_magnitude" and c["implementation"] == s["implementation"]
                      and c["machine"] == s["machine"] and c["dtype"] == s["dtype"] and c["x"] is not None),
                     key=lambda c: c["x"])
        if len(pts) < 2:
            continue
        base = min(pts, key=lambda c: abs(math.log10(c["x"])) if c["x"] > 0 else math.inf)
        bad = [c for c in pts if nonfinite(c) or finite_max(c) > 10 * max(finite_max(base), 1)]
        if bad:
            out.append(f"**{series_name(report, s['implementation'], s['machine'], 'rmsnorm')} {s['dtype']}**: "
                       f"error depends on the row's magnitude — {fmt_max(base)} at rms {base['x']:.3g}, "
                       + ", ".join(f"{fmt_max(c)} at rms {c['x']:.3g}" for c in bad[:4])
                       + (", …" if len(bad) > 4 else "") + " (x² leaves the working format's range).")
    # The backward's range: dy near the format's edges (subnormal dy, |dy·w| near overflow).
    for s in (s for s in report["summary"] if op_of(s) in BACKWARD):
        sweep = "bwd_dy_scale" if op_of(s) == "layernorm_bwd" else "rmsnorm_bwd_dy_scale"
        pts = [c for c in cells if c["sweep"] == sweep and c["implementation"] == s["implementation"]
               and c["machine"] == s["machine"] and c["dtype"] == s["dtype"] and c["x"] is not None]
        if len(pts) < 2:
            continue
        base = min(pts, key=lambda c: abs(math.log2(c["x"])) if c["x"] > 0 else math.inf)
        bad = sorted((c for c in pts if nonfinite(c) or finite_max(c) > 10 * max(finite_max(base), 1)), key=lambda c: c["x"])
        if bad:
            out.append(f"**{series_name(report, s['implementation'], s['machine'], op_of(s))} {s['dtype']}**: dx's error "
                       f"depends on dy's scale — {fmt_max(base)} at {base['label']}, "
                       + ", ".join(f"{fmt_max(c)} at {c['label']}" for c in bad[:4]) + (", …" if len(bad) > 4 else "") + ".")
    over = [c for c in cells if isinstance(c.get("bound_ulp"), (int, float)) and finite_max(c) > c["bound_ulp"]]
    for c in over[:5]:
        out.append(f"**Bound exceeded** — {c['implementation']} {c['dtype']} at {c['label']}: "
                   f"{fmt_ulp(finite_max(c))} > bound {fmt_ulp(c['bound_ulp'])}: the kernel or its bound "
                   f"model (reports/src/bounds.cpp) is wrong.")
    # Kernels that could not run: one line per kernel and reason. A dtype the kernel does not support
    # at all is no finding.
    for impl in report["implementations"]:
        reasons = {}
        for op, states in impl.get("ops", {"layernorm": impl["dtypes"]}).items():
            for dtype in DTYPES:
                state = states.get(dtype, "measured")
                if state.startswith("skipped") and "does not support dtype" not in state and "does not implement" not in state:
                    reasons.setdefault(state[len("skipped: "):], []).append(f"{OPS.get(op, op)} {dtype}" if several_ops else dtype)
        for reason, dtypes in reasons.items():
            out.append(f"{series_name(report, impl['name'], impl['machine'])} not measured for "
                       f"{', '.join(dtypes)}: {reason}.")
    errors = [c for c in report["cells"] if c["status"] != "ok"]
    for c in errors[:5]:
        out.append(f"**Error** — {c['implementation']} {c['dtype']} at {c['label']}: {c['message']}")
    return out


def grad_max(s, which):
    """dgamma's or dbeta's worst scaled ulp, as fmt_max: infinite with non-finite mismatches; — when not measured."""
    if not s.get(f"{which}_elements"):
        return "—"
    worst = fmt_ulp(s[f"{which}_max_finite_ulp"])
    return f"∞ ({worst} finite)" if s[f"{which}_nonfinite_mismatches"] else worst


def summary_table(report, op, dtype):
    rows = [s for s in report["summary"] if s["dtype"] == dtype and op_of(s) == op]
    if not rows:
        return None
    if op in BACKWARD:
        header = ["implementation"] + (["machine"] if len(report["machines"]) > 1 else []) + [
            "dx max ulp", "dx p99.9 ulp", "dx correctly rounded", "dx non-finite mismatches", "dgamma max ulp",
            "dgamma correctly rounded", "dbeta max ulp", "worst at"]
        body = [[s["implementation"]] + ([s["machine"]] if len(report["machines"]) > 1 else []) + [
            fmt_max(s), fmt_ulp(s["p999_ulp"]), fmt_fraction(s["correctly_rounded"]), str(nonfinite(s)), grad_max(s, "dgamma"),
            fmt_fraction(s["dgamma_correctly_rounded"]) if s.get("dgamma_elements") else "—", grad_max(s, "dbeta"),
            s["worst_cell"]] for s in rows]
        return header, body
    header = ["implementation"] + (["machine"] if len(report["machines"]) > 1 else []) + [
        "max ulp", "p99.9 ulp", "correctly rounded", "non-finite mismatches", "mean max ulp*", "rstd max ulp", "worst at"]
    body = []
    for s in rows:
        body.append([s["implementation"]] + ([s["machine"]] if len(report["machines"]) > 1 else []) + [
            fmt_max(s), fmt_ulp(s["p999_ulp"]), fmt_fraction(s["correctly_rounded"]),
            str(nonfinite(s)), fmt_ulp(s["mean_max_ulp"]), fmt_ulp(s["rstd_max_ulp"]), s["worst_cell"]])
    return header, body


def quantized_table(report, op, dtype):
    """The quantized outputs of one op and x dtype (report.json "quantized"; reports before it have none)."""
    rows = [q for q in report.get("quantized", []) if q["op"] == op and q["dtype"] == dtype]
    if not rows:
        return None
    several = len(report["machines"]) > 1
    header = ["implementation"] + (["machine"] if several else []) + [
        "format/scaling", "input", "max quanta", "correctly rounded", "saturated", "non-finite mismatches", "scales max"]
    body = []
    for q in rows:
        scale = "—" if q["scale_max"] is None else f"{fmt_ulp(q['scale_max'])} {q['scale_unit']}"
        body.append([q["implementation"]] + ([q["machine"]] if several else []) + [
            q["quant"], q["input"], "non-finite" if q["max_quanta"] is None else fmt_ulp(q["max_quanta"]),
            fmt_fraction(q["correctly_rounded"]), str(q["saturated"]), str(q["nonfinite_mismatches"]), scale])
    return header, body


def sweep_table(report, sweep, dtype):
    cells = [c for c in report["cells"] if c["sweep"] == sweep and c["dtype"] == dtype]
    if not cells:
        return None
    points = sorted({(c["point"], c["label"]) for c in cells})
    series = sorted({(c["implementation"], c["machine"]) for c in cells}, key=lambda k: (k[1], k[0]))
    header = ["point"] + [series_name(report, i, m) for i, m in series]
    body = []
    for p, label in points:
        row = [label]
        for impl, machine in series:
            hit = [c for c in cells if c["point"] == p and c["implementation"] == impl and c["machine"] == machine]
            if not hit:
                row.append("")
            elif hit[0]["status"] != "ok":
                row.append("error")
            else:
                c = hit[0]
                text = fmt_ulp(finite_max(c))
                if nonfinite(c):
                    text += f" · {nonfinite(c)} non-finite"
                if c["bound_ulp"] is not None:
                    text += f" (≤ {fmt_ulp(c['bound_ulp'])})"
                row.append(text)
        body.append(row)
    return header, body


def shared_legend(fig, axes):
    """One legend under the figure for the first row's panels, each label once."""
    handles, labels = [], []
    for ax in axes[0]:
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in labels:
                handles.append(h)
                labels.append(l)
    fig.legend(handles, labels, loc="lower center", ncol=min(6, len(labels)), fontsize=8, frameon=False)


def blocks(report, images, baseline=None, baseline_path=None):
    """The document as a list of (kind, content) blocks, rendered to Markdown and HTML alike: the verdicts first
    (and, with a baseline, what changed since it), then the machines, the findings, the tables and the plots."""
    b = [("h1", "lnorm precision report"), ("h2", "Verdicts"), ("p", VERDICTS_LEAD),
         ("table", verdict_table(report, verdicts(report))), ("p", VERDICTS_RULE)]
    if baseline is not None:
        b += baseline_blocks(report, baseline, baseline_path)
    for m in report["machines"]:
        b.append(("p", f"**{m['label']}**: {m['description']} — lnorm {m['lnorm_version']}, {m['created']}, "
                        f"seed {m['seed']}, {'quick' if m['quick'] else 'full'} sweeps, {m['seconds']:.0f} s."))
    b.append(("p", "Errors are scaled ulps against the exact LayerNorm (or RMSNorm) rounded once (DESIGN.md \"Measuring "
                   "error\"): 0.5 is the best any kernel can do without being correctly rounded. The bound in "
                   "parentheses is the algorithm's first-order worst case (reports/src/bounds.cpp cites the "
                   "derivations); measurements sit far below it, and a measurement above it is a bug. mean*: in ulps "
                   "of max(|mean|, sqrt(var + eps)), the size by which a mean error moves every output, as "
                   "`lnorm verify` measures it; rstd: plain ulps of the stats format. No bound (—): the kernel's "
                   "algorithm is unknown to lnorm, a row holds NaN/Inf, or a row leaves the range the bound "
                   "assumes (squares that overflow or underflow in naive and onepass); RMSNorm has no bound model "
                   "yet. RMSNorm has no kappa: nothing cancels in mean(x²), so its sweeps are width, eps/mean(x²), "
                   "the row's magnitude (where x² leaves the format's range) and the input classes; it has no mean. "
                   "The backward (`--dir bwd`) measures dx against its natural scale (DESIGN.md \"Backward\"), with "
                   "dgamma's and dbeta's worst beside it; its sweeps add dy's scale, from subnormal dy to |dy·w| near "
                   "overflow, and it has no bound model."))
    b.append(("h2", "Findings"))
    b.append(("ul", findings(report)))
    b.append(("h2", "Kernel × dtype"))
    several_ops = len(ops_in(report)) > 1
    for op in ops_in(report):
        for d in DTYPES:
            t = summary_table(report, op, d)
            if t:
                b.append(("h3", f"{OPS.get(op, op)} {d}" if several_ops else d))
                b.append(("table", t))
    if report.get("quantized"):
        b.append(("h2", "Quantized outputs"))
        b.append(("p", "q = Q(y/s) in fp8 or int8 for the kernels that write it (`lnorm list`: quantized), measured as "
                       "`lnorm check --quant` measures it: q in quanta of the format at y*/s with the kernel's own "
                       "scales (0.5 is a correct rounding of y*/s; a kernel that quantizes its f32 y reads a little "
                       "over 0.5 where that y sits across a midpoint), correctly rounded when the code is the exact "
                       "one, saturated where ±max decided q; the scales in f32 ulps (mx: E8M0 steps) from the exact "
                       "ones. Tensor scaling uses the problem's exact amax/qmax. Inputs: normal rows, and heavy-tailed "
                       "rows (x = z³: outliers beside tiny values)."))
        if "quantized" in images:
            b.append(("img", (images["quantized"], "Quantized outputs: max error in quanta by format and scaling")))
        for op in ops_in(report):
            for d in DTYPES:
                t = quantized_table(report, op, d)
                if t:
                    b.append(("h3", f"{OPS.get(op, op)} {d}: quantized"))
                    b.append(("table", t))
    for sweep in report["sweeps"]:
        b.append(("h2", sweep["title"]))
        if sweep["name"] in images:
            b.append(("img", (images[sweep["name"]], sweep["title"])))
        for d in DTYPES:
            t = sweep_table(report, sweep["name"], d)
            if t:
                b.append(("h3", f"{d}: max scaled ulp of dx" if op_of(sweep) in BACKWARD else f"{d}: max scaled ulp (bound)"))
                b.append(("table", t))
    for key, title in (("histograms", "Error distributions"), ("correctly_rounded", "Correctly rounded fraction")):
        if key in images:
            b.append(("h2img", title))
            b.append(("img", (images[key], title)))
    if baseline is None:
        b.append(("p", "Zero errors are drawn at 0.01 on the log axes. Regenerate: `lnorm report --out DIR` "
                       "(or `python3 reports/render.py DIR` to redraw from DIR/report.json)."))
    else:
        b.append(("p", "Zero errors are drawn at 0.01 on the log axes. Regenerate: `lnorm report --out DIR --baseline OLD` "
                       "(or `python3 reports/render.py DIR --baseline OLD` to redraw from DIR/report.json; OLD here: "
                       f"`{baseline_path}`)."))
    return b


def md_cell(text):
    """A table cell's text, safe in a Markdown table (an error message may hold a | or a newline)."""
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(doc):
    out = []
    for kind, content in doc:
        if kind in ("h1", "h2", "h3"):
            out.append("#" * int(kind[1]) + " " + content + "\n")
        elif kind == "p":
            out.append(content + "\n")
        elif kind == "ul":
            out.extend(f"- {item}" for item in content)
            out.append("")
        elif kind == "table":
            header, body = content[:2]
            out.append("| " + " | ".join(header) + " |")
            out.append("|" + "|".join("---" for _ in header) + "|")
            out.extend("| " + " | ".join(md_cell(v) for v in row) + " |" for row in body)
            out.append("")
        elif kind == "img":
            out.append(f"![{content[1]}]({content[0]})\n")
    return "\n".join(out) + "\n"


def inline_html(text):
    """**bold** and `code` of the Markdown blocks, escaped for HTML."""
    parts = html.escape(text).split("**")
    text = "".join(p if i % 2 == 0 else f"<b>{p}</b>" for i, p in enumerate(parts))
    parts = text.split("`")
    return "".join(p if i % 2 == 0 else f"<code>{p}</code>" for i, p in enumerate(parts))


def to_html(doc):
    out = ["<!doctype html><html><head><meta charset='utf-8'><title>lnorm precision report</title><style>",
           "body{font-family:sans-serif;max-width:1400px;margin:2em auto;padding:0 1em;color:#222}",
           "table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:13px}",
           "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:first-child,th:first-child{text-align:left}",
           "th{background:#f3f3f3}img{max-width:100%;border:1px solid #eee}code{background:#f5f5f5}",
           "td.pass{color:#1a7f37;font-weight:bold}td.fail{color:#c62828;font-weight:bold}td.expected{color:#777;"
           "font-weight:bold}td.error{color:#b35c00;font-weight:bold}td.unmeasured{color:#777}",
           "table.verdicts td,table.verdicts th{text-align:left}",
           "</style></head><body>"]
    for kind, content in doc:
        if kind == "h2img":
            out.append(f"<h2>{inline_html(content)}</h2>")
        elif kind in ("h1", "h2", "h3"):
            out.append(f"<{kind}>{inline_html(content)}</{kind}>")
        elif kind == "p":
            out.append(f"<p>{inline_html(content)}</p>")
        elif kind == "ul":
            out.append("<ul>" + "".join(f"<li>{inline_html(i)}</li>" for i in content) + "</ul>")
        elif kind == "table":
            header, body = content[:2]
            css = f" class='{content[2]}'" if len(content) > 2 else ""
            out.append(f"<table{css}><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>")
            out.extend("<tr>" + "".join(f"<td class='{v.css}'>{html.escape(v)}</td>" if isinstance(v, Styled)
                                        else f"<td>{html.escape(v)}</td>" for v in row) + "</tr>" for row in body)
            out.append("</table>")
        elif kind == "img":
            out.append(f"<p><img src='{html.escape(content[0])}' alt='{html.escape(content[1])}'></p>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def write_atomically(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def parse_args(argv):
    """DIR [--baseline OLD] (or --baseline=OLD, before or after DIR)."""
    folder, baseline, args = None, None, list(argv[1:])
    while args:
        arg = args.pop(0)
        if arg == "--baseline" and args:
            baseline = args.pop(0)
        elif arg.startswith("--baseline="):
            baseline = arg[len("--baseline="):]
        elif folder is None and not arg.startswith("--"):
            folder = arg
        else:
            sys.exit(__doc__)
    if folder is None or baseline == "":
        sys.exit(__doc__)
    return folder, baseline


def main(argv):
    folder, baseline_path = parse_args(argv)
    report = load(folder)
    baseline = load(baseline_path) if baseline_path is not None else None
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("render.py: matplotlib is missing (Debian: apt-get install python3-matplotlib)")
    images = {}
    for sweep in report["sweeps"]:
        name = plot_sweep(report, sweep, folder, plt)
        if name:
            images[sweep["name"]] = name
    for key, fn in (("histograms", plot_histograms), ("correctly_rounded", plot_correctly_rounded),
                    ("quantized", plot_quantized)):
        name = fn(report, folder, plt)
        if name:
            images[key] = name
    doc = blocks(report, images, baseline, baseline_path)
    md = to_markdown([blk for blk in doc if blk[0] not in ("img", "h2img")] + [("p", "Plots: " + ", ".join(
        f"[{n}]({n})" for n in images.values()) + " (in index.html).")])
    write_atomically(os.path.join(folder, "report.md"), md)
    write_atomically(os.path.join(folder, "index.html"), to_html(doc))


if __name__ == "__main__":
    main(sys.argv)
