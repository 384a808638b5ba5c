#!/usr/bin/env python3
"""Compare two `lnorm verify --json` files cell for cell: a refactor must not change a verdict or a number.

    scripts/compare_verify.py BEFORE.json AFTER.json [BEFORE2.json AFTER2.json ...]

A cell is kernel x op x dtype x property. For every cell of either file: the same status, the same worst
numbers (every key, bit for bit: NaN equals NaN), the same correctly-rounded fraction and case count. A cell
in one file only is a difference. Messages are compared too but only reported (a reworded skip reason is
not a behaviour change). Prints one line per difference and a summary per pair; exits 1 on any difference.
Standard library only (any python3).
"""
import json
import math
import sys

GATED = ("status", "worst", "correctly_rounded", "cases")


def cells(path):
    with open(path) as f:
        doc = json.load(f)
    out = {}
    for r in doc["results"]:
        key = (r["kernel"], r["op"], r["dtype"], r["property"])
        if key in out:
            raise SystemExit(f"{path}: cell {key} appears twice")
        out[key] = r
    return out


def same(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def compare(before_path, after_path):
    before, after = cells(before_path), cells(after_path)
    differences = reworded = 0
    for key in sorted(before.keys() | after.keys()):
        name = " ".join(key)
        if key not in after or key not in before:
            print(f"  {name}: only in {before_path if key in before else after_path}")
            differences += 1
            continue
        b, a = before[key], after[key]
        for field in GATED:
            if not same(b.get(field), a.get(field)):
                print(f"  {name}: {field} {b.get(field)!r} -> {a.get(field)!r}")
                differences += 1
        if b.get("message") != a.get("message"):
            print(f"  {name}: message (not gated) {b.get('message')!r} -> {a.get('message')!r}")
            reworded += 1
    statuses = {}
    for r in after.values():
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))
    print(f"{before_path} vs {after_path}: {len(after)} cells ({summary}); "
          f"{differences} differences in {'/'.join(GATED)}, {reworded} messages reworded")
    return differences


def main(argv):
    if len(argv) < 2 or len(argv) % 2:
        raise SystemExit(__doc__)
    total = sum(compare(argv[i], argv[i + 1]) for i in range(0, len(argv), 2))
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
