#!/usr/bin/env python3
"""torch.nn.functional.layer_norm on the shapes of bench/gpu/shapes.txt, timed like lnorm_gpu_bench.

    python3 bench/gpu/torch_layernorm.py --shapes bench/gpu/shapes.txt --out torch_layernorm.json [--reps 20]

Same rows per shape (x >= --min-mib MiB), gamma and beta present, eps 1e-5; CUDA events around each
call, 3 warm-ups, median of --reps; GB/s counts x read + y written; the device-to-device copy of the
same bytes (y.copy_(x)) is measured in the same run, so "% of copy" compares like with like.
"""
import argparse
import json
import math
import statistics
import sys

import torch

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def read_shapes(path, min_mib):
    shapes = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            d, cols = line.split()
            cols = int(cols)
            es = torch.empty((), dtype=DTYPES[d]).element_size()
            rows = math.ceil(min_mib * 1024 * 1024 / (cols * es))
            shapes.append((d, rows, cols))
    return shapes


def median_ms(call, reps):
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    times = []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(reps):
        start.record()
        call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="bench/gpu/shapes.txt")
    ap.add_argument("--out", default="torch_layernorm.json")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--min-mib", type=float, default=256)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_layernorm: no CUDA device", file=sys.stderr)
        return 1
    gen = torch.Generator(device="cuda").manual_seed(1)
    results = []
    print(f"{'what':<12} {'dtype':<5} {'rows':>10} {'cols':>6} {'ms':>10} {'GB/s':>10} {'% copy':>8}")
    for d, rows, cols in read_shapes(args.shapes, args.min_mib):
        dt = DTYPES[d]
        x = (torch.randn(rows, cols, device="cuda", generator=gen) + 0.5).to(dt)  # random, not zeros
        w = torch.randn(cols, device="cuda", generator=gen).to(dt)
        b = torch.randn(cols, device="cuda", generator=gen).to(dt)
        y = torch.empty_like(x)
        moved = 2 * x.numel() * x.element_size()
        copy_ms = median_ms(lambda: y.copy_(x), args.reps)
        copy_gbps = moved / (copy_ms * 1e-3) / 1e9
        ms = median_ms(lambda: torch.nn.functional.layer_norm(x, (cols,), w, b, 1e-5), args.reps)
        gbps = moved / (ms * 1e-3) / 1e9
        print(f"{'copy':<12} {d:<5} {rows:>10} {cols:>6} {copy_ms:>10.4f} {copy_gbps:>10.1f} {100:>8}")
        print(f"{'torch':<12} {d:<5} {rows:>10} {cols:>6} {ms:>10.4f} {gbps:>10.1f} {100 * gbps / copy_gbps:>8.1f}")
        results.append({"impl": "torch.nn.functional.layer_norm", "dtype": d, "rows": rows, "cols": cols,
                        "bytes_x": x.numel() * x.element_size(), "median_ms": ms, "GBps": gbps,
                        "copy_median_ms": copy_ms, "copy_GBps": copy_gbps, "pct_of_copy": 100 * gbps / copy_gbps})
        del x, y, w, b
        torch.cuda.empty_cache()
    out = {"tool": "bench/gpu/torch_layernorm.py", "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "cuda": torch.version.cuda, "reps": args.reps, "bytes_counted": "x read + y written",
           "gamma_beta": True, "eps": 1e-5, "results": results}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=2)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
