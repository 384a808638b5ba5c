#!/usr/bin/env bash
# The nightly tier (docs/ci.md "Tiers"): what the per-change run (.ci/run, 30 minutes on 2 cores) leaves out —
# ctest's `nightly` label (more than 2^31 elements, the full suite at seed 2, the AVX-512 emulation's bits on the
# full suite, the CUDA emulation's backward suite) — then the forward and backward suites at seeds 3-5, each
# as one verify run sharded over the cores and merged (verify --shard/--merge). Run it on a schedule, or before
# a release; on a many-core machine it takes minutes. Exit 1 when anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" >/dev/null
status=0
ctest --preset release -j "$(nproc)" -L nightly || status=1
lnorm=build/release/cli/lnorm
out=build/release/nightly
mkdir -p "$out"
shards=$(nproc)
for seed in 3 4 5; do
  for dir in fwd bwd; do
    cases=160
    [ "$dir" = bwd ] && cases=80  # as ctest verify_full_bwd_*
    pids=()
    for k in $(seq 1 "$shards"); do
      "$lnorm" verify --dir "$dir" --seed "$seed" --cases "$cases" --shard "$k/$shards" \
        --json "$out/$dir-seed$seed-shard$k.json" >/dev/null 2>&1 &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || true; done
    files=()
    for k in $(seq 1 "$shards"); do files+=("$out/$dir-seed$seed-shard$k.json"); done
    echo "== verify --dir $dir --seed $seed ($shards shards, merged)"
    "$lnorm" verify --merge "${files[@]}" --json "$out/$dir-seed$seed.json" --junit "$out/$dir-seed$seed.xml" |
      tail -2 || status=1
  done
done
exit "$status"
