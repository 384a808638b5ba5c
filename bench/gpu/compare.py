#!/usr/bin/env python3
"""Joins lnorm_gpu_bench's and torch_layernorm.py's JSON into the GPU table and its targets:
>= 85% of the copy bandwidth and >= 1.1x torch's layer_norm, per shape.

    python3 bench/gpu/compare.py gpu_bench.json torch_layernorm.json [--out summary.json]
Prints a table; exit 0 always (a missed target is a finding, not an error).
"""
import json
import sys


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    ours = json.load(open(sys.argv[1]))
    torch = json.load(open(sys.argv[2]))
    tmap = {(r["dtype"], r["rows"], r["cols"]): r for r in torch["results"]}
    rows = []
    print(f"GPU: {ours['gpu']} (driver {ours['cuda_driver_version']}, runtime {ours['cuda_runtime_version']}); "
          f"torch {torch['torch']} on {torch['gpu']}")
    print(f"{'kernel':<11} {'dtype':<5} {'cols':>6} {'GB/s':>8} {'%copy':>6} {'torch GB/s':>10} {'x torch':>8}  targets")
    for r in ours["results"]:
        t = tmap.get((r["dtype"], r["rows"], r["cols"]))
        ratio = r["GBps"] / t["GBps"] if t else float("nan")
        ok_copy = r["pct_of_copy"] >= 85
        ok_torch = bool(t) and ratio >= 1.1
        rows.append({**r, "torch_GBps": t["GBps"] if t else None, "x_torch": ratio,
                     "meets_85pct_copy": ok_copy, "meets_1p1x_torch": ok_torch})
        print(f"{r['kernel']:<11} {r['dtype']:<5} {r['cols']:>6} {r['GBps']:>8.1f} {r['pct_of_copy']:>6.1f} "
              f"{(t['GBps'] if t else float('nan')):>10.1f} {ratio:>8.2f}  "
              f"{'copy ok' if ok_copy else 'copy MISS'}, {'torch ok' if ok_torch else 'torch MISS'}")
    if len(sys.argv) > 4 and sys.argv[3] == "--out":
        json.dump({"gpu": ours["gpu"], "rows": rows}, open(sys.argv[4], "w"), indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
