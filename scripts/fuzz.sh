#!/usr/bin/env bash
# CI, after the sanitizer tests: the libFuzzer targets fuzz_npy (the .npy parser) and fuzz_cli (the command
# line, in-process), built by the asan preset (clang 14, ASan + UBSan: the one instrumented build, so after
# scripts/test-asan.sh this builds nothing), each run for FUZZ_SECONDS (default 60) from the committed seed
# corpus fuzz/corpus/<target>/ — the two side by side, one a core. New inputs go to a scratch folder, so the
# committed corpus changes only by hand. A crash fails the script; its input is copied to fuzz/crashes/
# (ignored by git) to be committed into fuzz/corpus/<target>/ with the fix (the *_corpus_replay ctests then
# replay it in every build).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
scripts/install-deps.sh
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$(nproc)" --target fuzz_npy fuzz_cli >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
targets=(npy cli)
pids=()
for target in "${targets[@]}"; do
  mkdir -p "$work/$target" "$work/$target-crash"
  echo "== fuzz_$target for ${seconds}s (seed corpus: $(ls fuzz/corpus/$target | wc -l) files)"
  # Absolute folders: fuzz_cli works in its own temporary folder. -close_fd_mask=3: the CLI prints a line per
  # refused input; libFuzzer and the sanitizers keep a copy of stderr for their own reports. -timeout=10: one
  # input running 10 s is a hang.
  build/asan/fuzz/fuzz_$target -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
    -close_fd_mask=3 -print_final_stats=1 -artifact_prefix="$work/$target-crash/" \
    "$work/$target" "$PWD/fuzz/corpus/$target" 2>"$work/$target.log" &
  pids+=($!)
done
status=0
for i in "${!targets[@]}"; do
  target=${targets[$i]}
  if ! wait "${pids[$i]}"; then
    status=1
    mkdir -p fuzz/crashes
    cp "$work/$target-crash/"* fuzz/crashes/ 2>/dev/null || true
    # The report; when none of these lines is there, the log's end (a grep that finds nothing must not
    # end the script under pipefail before it says why: it did once, on a UBSan "runtime error").
    grep -B2 -A30 -E "ERROR|runtime error|deadly signal|cli_fuzz:|npy_fuzz:|No such file" "$work/$target.log" | head -60 ||
      tail -30 "$work/$target.log"
    echo "fuzz_$target: crash; inputs copied to fuzz/crashes/"
  fi
  echo "== fuzz_$target"
  grep -E "^#.*DONE|stat::peak_rss_mb" "$work/$target.log" || tail -5 "$work/$target.log"
done
exit "$status"
