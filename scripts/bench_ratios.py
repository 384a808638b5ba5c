#!/usr/bin/env python3
"""The SIMD kernels' speed ratios from `lnorm bench --json` files (the tables of docs/performance.md).

Each ratio is taken inside one bench run (kernel and ceiling measured together), then the median over the runs
given (one file per run). Inside a run, where the JSON has each round's speed (round_bytes_per_second: every entry
of a dtype, shape and stream count timed once per round, back to back), a ratio of two kernels is the median of
their per-round ratios, so both sides see the same second of a shared machine; otherwise the ratio of medians:
  x sketch  avx2/avx512 against the fastest sketch:* kernel (../shared/anchors/sketch_plugin.cpp loaded with
            --plugin) of the same op, dtype and shape
  of copy   the bench's fraction_of_copy (the fastest copy of the same bytes in that run)
  x fast    avx2_cr/avx512_cr against avx2/avx512

Usage: scripts/bench_ratios.py RUN1.json [RUN2.json ...]   (plain python3, no numpy)
"""
import json
import statistics
import sys
from collections import defaultdict


def ratio(a, b):
    """a over b: the median of per-round ratios where both have the same rounds, else the ratio of medians."""
    ra, rb = a.get("round_bytes_per_second"), b.get("round_bytes_per_second")
    if ra and rb and len(ra) == len(rb):
        return statistics.median(x / y for x, y in zip(ra, rb))
    return a["bytes_per_second"] / b["bytes_per_second"]


def main(paths):
    runs = [json.load(open(p)) for p in paths]
    gbs, frac, sketch, vs_fast = defaultdict(list), defaultdict(list), defaultdict(list), defaultdict(list)
    for run in runs:
        by = {(e["kernel"], e["op"], e["dtype"], e["shape"]): e for e in run["results"]}
        for (k, op, d, s), e in by.items():
            if not e.get("bytes_per_second"):
                continue  # skipped here
            gbs[(k, op, d, s)].append(e["bytes_per_second"] / 1e9)
            if "fraction_of_copy" in e:
                frac[(k, op, d, s)].append(e["fraction_of_copy"])
            sketches = [v for (k2, op2, d2, s2), v in by.items()
                        if k2.startswith("sketch:") and (op2, d2, s2) == (op, d, s) and v.get("bytes_per_second")]
            if sketches and not k.startswith("sketch:") and not k.endswith("_cr"):
                best = max(sketches, key=lambda v: v["bytes_per_second"])  # the fastest sketch by its median
                sketch[(k, op, d, s)].append(ratio(e, best))
            if k.endswith("_cr") and by.get((k[:-3], op, d, s), {}).get("bytes_per_second"):
                vs_fast[(k, op, d, s)].append(ratio(e, by[(k[:-3], op, d, s)]))
    med = statistics.median
    print(f"{len(runs)} run(s); medians of per-run ratios")
    print(f"{'op':14} {'dtype':5} {'shape':11} {'kernel':10} {'GB/s':>6} {'of copy':>8} {'x sketch':>9} {'x fast':>7}")
    order = lambda key: (key[1], key[2], [int(v) for v in key[3].split("x")], key[0])
    for key in sorted(gbs, key=order):
        k, op, d, s = key
        if k not in ("avx2", "avx512", "avx2_cr", "avx512_cr"):
            continue
        cells = [f"{med(gbs[key]):6.1f}", f"{med(frac[key]):8.2f}" if key in frac else f"{'':8}",
                 f"{med(sketch[key]):9.2f}" if key in sketch else f"{'':9}", f"{med(vs_fast[key]):7.2f}" if key in vs_fast else ""]
        print(f"{op:14} {d:5} {s:11} {k:10} " + " ".join(cells))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
