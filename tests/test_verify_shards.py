#!/usr/bin/env python3
"""ctest verify_shards: `lnorm verify --shard K/N` over K = 1..3, merged with `lnorm verify --merge`, is the
unsharded run cell for cell (every JSON field of every result but its seconds), with its exit status, and
the merge refuses a missing shard, a shard given twice, and a shard of another run.

Usage: test_verify_shards.py LNORM SCRATCH_DIR
"""
import json
import os
import subprocess
import sys

lnorm, scratch = sys.argv[1], sys.argv[2]
os.makedirs(scratch, exist_ok=True)
# Passing, failing (naive's expected failures, and MISTRUSTED cells: 4 cases miss input classes), forward and
# backward cells; a second or two of work (the test also runs under ASan).
SELECTIONS = {
    "fwd": ["--kernel", "naive", "--kernel", "welford", "--op", "layernorm", "--op", "rmsnorm", "--dtype", "f32",
            "--dtype", "bf16", "--quick", "--cases", "4"],
    "bwd": ["--dir", "bwd", "--kernel", "naive", "--kernel", "welford", "--dtype", "f32", "--quick", "--cases", "4",
            "--seed", "3"],
}
failures = []


def run(args, expect=None):
    p = subprocess.run([lnorm, "verify", *args], capture_output=True, text=True)
    if expect is not None and p.returncode != expect:
        failures.append(f"lnorm verify {' '.join(args)}: exit {p.returncode}, expected {expect}\n{p.stdout[-2000:]}{p.stderr}")
    return p


def results(path):
    with open(path) as f:
        j = json.load(f)
    return j, [{k: v for k, v in r.items() if k != "seconds"} for r in j["results"]]


for label, sel in SELECTIONS.items():
    whole = os.path.join(scratch, f"{label}-whole.json")
    w = run([*sel, "--json", whole])
    shards = []
    for k in (1, 2, 3):
        shards.append(os.path.join(scratch, f"{label}-shard-{k}.json"))
        run([*sel, "--shard", f"{k}/3", "--json", shards[-1]], expect=w.returncode)
    merged = os.path.join(scratch, f"{label}-merged.json")
    m = run(["--merge", *shards, "--json", merged, "--junit", merged + ".xml"], expect=w.returncode)
    wj, wr = results(whole)
    mj, mr = results(merged)
    sizes = [len(results(s)[1]) for s in shards]
    if sum(sizes) != len(wr) or min(sizes) == 0:
        failures.append(f"{label}: shard sizes {sizes} do not split the run's {len(wr)} cells")
    if wr != mr:
        diff = next((i for i, (a, b) in enumerate(zip(wr, mr)) if a != b), min(len(wr), len(mr)))
        failures.append(f"{label}: merged results differ from the whole run's at cell {diff} "
                        f"({len(mr)} vs {len(wr)} cells)")
    for key in ("pass", "seed", "quick", "cases", "budgets", "selection", "cells_total"):
        if wj[key] != mj[key]:
            failures.append(f"{label}: merged {key} {mj[key]!r} != the whole run's {wj[key]!r}")
    verdict = lambda out: [l for l in out.splitlines() if l.startswith(("PASS:", "FAIL:"))]
    if [v.split("(seed")[0] for v in verdict(w.stdout)] != [v.split("(seed")[0] for v in verdict(m.stdout)]:
        failures.append(f"{label}: merged verdict {verdict(m.stdout)} != the whole run's {verdict(w.stdout)}")
    with open(merged + ".xml") as f:
        if f.read().count("<testcase ") != len(wr):
            failures.append(f"{label}: the merged JUnit does not hold one testcase per cell")
    print(f"{label}: {len(wr)} cells split {sizes}, merged == whole run (exit {w.returncode})")

# Refusals: exit 2 with the reason.
s = [os.path.join(scratch, f"fwd-shard-{k}.json") for k in (1, 2, 3)]
other = os.path.join(scratch, "bwd-shard-3.json")
shard_bytes = [open(x, "rb").read() for x in s]
for args, words in ((["--merge", s[0], s[1]], "missing"), (["--merge", s[0], s[0], s[2]], "twice"),
                    (["--merge", s[0], s[1], other], "not a shard of the same run"),
                    (["--merge", s[0], s[1], s[2], "--seed", "2"], "takes only"),
                    (["--merge", s[0], s[1], s[2], "--json", s[0]], "is also an input"),
                    (["--merge", s[0], s[1], s[2], "--junit", s[1]], "is also an input"),
                    ([*SELECTIONS["fwd"], "--shard", "4/3"], "1 <= K <= N"),
                    ([*SELECTIONS["fwd"], "--shard", "1/0"], "1 <= K <= N")):
    p = run(args, expect=2)
    if words not in p.stderr:
        failures.append(f"lnorm verify {' '.join(args)}: stderr lacks '{words}': {p.stderr}")
if [open(x, "rb").read() for x in s] != shard_bytes:
    failures.append("a refused --merge changed a shard's file (an output that is an input must be refused before any write)")

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
