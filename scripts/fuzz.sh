#!/usr/bin/env bash
# CI, after the sanitizer tests: builds the libFuzzer targets (fuzz preset: clang 14, ASan + UBSan) and
# runs each for FUZZ_SECONDS (default 60) from the committed seed corpus fuzz/corpus/<target>/. New
# inputs go to a scratch folder, so the committed corpus changes only by hand. A crash fails the
# script; its input is copied to fuzz/crashes/ to be committed into fuzz/corpus/<target>/ with the fix
# (the *_corpus_replay ctests then replay it in every build).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
scripts/install-deps.sh
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)" >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
for target in npy cli; do
  mkdir -p "$work/$target" "$work/$target-crash"
  echo "== fuzz_$target for ${seconds}s (seed corpus: $(ls fuzz/corpus/$target | wc -l) files)"
  # Absolute folders: fuzz_cli works in its own temporary folder. -close_fd_mask=3: the CLI prints a line per refused input; libFuzzer and the sanitizers keep a
  # copy of stderr for their own reports. -timeout=10: one input running 10 s is a hang.
  if ! build/fuzz/fuzz/fuzz_$target -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
      -close_fd_mask=3 -print_final_stats=1 -artifact_prefix="$work/$target-crash/" \
      "$work/$target" "$PWD/fuzz/corpus/$target" 2>"$work/$target.log"; then
    status=1
    mkdir -p fuzz/crashes
    cp "$work/$target-crash/"* fuzz/crashes/ 2>/dev/null || true
    # The report; when none of these lines is there, the log's end (a grep that finds nothing must not
    # end the script under pipefail before it says why: it did once, on a UBSan "runtime error").
    grep -B2 -A30 -E "ERROR|runtime error|deadly signal|cli_fuzz:|npy_fuzz:|No such file" "$work/$target.log" | head -60 ||
      tail -30 "$work/$target.log"
    echo "fuzz_$target: crash; inputs copied to fuzz/crashes/"
  fi
  grep -E "^#.*DONE|stat::peak_rss_mb" "$work/$target.log" || tail -5 "$work/$target.log"
done
exit "$status"
