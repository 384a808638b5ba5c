#!/usr/bin/env bash
# Set-up + the main job: builds lnorm, lists the kernels, measures every kernel against the exact
# reference on a few generated problems (centred, offset kappa ≈ 1e4, constant, f16/bf16), runs the
# quick property suite, the quick benchmark, a kernel selection, and writes a quick precision report.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" >/dev/null
lnorm=build/release/cli/lnorm
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== lnorm list"
"$lnorm" list
echo
# The kernels that can run here (the CUDA ones need a GPU; `lnorm list` says why not).
available=$("$lnorm" list | awk 'NR > 1 && $3 == "yes" { print $1 }')

# name  dtype  gen-flags
cases=(
  "centred   f32  --dist normal"
  "offset    f32  --dist offset --offset 1e4"
  "constant  f32  --dist constant --offset 3.14159"
  "centred   f16  --dist normal"
  "centred   bf16 --dist normal"
)
echo "== accuracy against the exact reference (64x1024, eps 1e-5, random gamma/beta; budget 8 + 1*kappa scaled ulps)"
printf '%-9s %-5s %-8s %s\n' case dtype kernel "verdict (from lnorm check)"
for c in "${cases[@]}"; do
  read -r label dtype flags <<<"$c"
  x="$work/$label-$dtype-x.npy"; g="$work/$label-$dtype-g.npy"; b="$work/$label-$dtype-b.npy"
  # shellcheck disable=SC2086
  "$lnorm" gen --out "$x" --gamma-out "$g" --beta-out "$b" --shape 64x1024 --dtype "$dtype" $flags
  for k in reference $available; do
    y="$work/y.npy"
    if [ "$k" = reference ]; then "$lnorm" reference --x "$x" --gamma "$g" --beta "$b" --dtype "$dtype" --y "$y"
    else "$lnorm" run --kernel "$k" --x "$x" --gamma "$g" --beta "$b" --dtype "$dtype" --y "$y"; fi
    verdict=$("$lnorm" check --x "$x" --gamma "$g" --beta "$b" --dtype "$dtype" --y "$y" | head -1 || true)
    printf '%-9s %-5s %-8s %s\n' "$label" "$dtype" "$k" "$verdict"
  done
done
echo
echo "== lnorm verify --quick: ten properties x every kernel x dtype against property_tests/budgets.toml"
status=0
"$lnorm" verify --quick > "$work/verify.txt" || status=$?
sed '/^$/q' "$work/verify.txt"              # the table
tail -3 "$work/verify.txt"                  # classes generated and the verdict
echo "(expected failures and their reasons: lnorm verify --quick; budgets in property_tests/budgets.toml)"

echo
echo "== lnorm bench --quick: GB/s beside the copy ceiling and oneDNN, single thread (bench/README.md explains)"
"$lnorm" bench --quick || status=$?
echo
echo "== lnorm select --shape 4096x1024 --dtype f32 --max-ulp 12"
"$lnorm" select --shape 4096x1024 --dtype f32 --max-ulp 12 || status=$?
echo
echo "== lnorm report --quick: error against kappa, width, eps/var and input class, every kernel x dtype"
report=out/report
"$lnorm" report --quick --out "$report" || status=$?
sed -n '/^## Findings/,/^## Kernel/p' "$report/report.md" | sed '$d'
echo "open $report/index.html (plots, tables), $report/report.md (for a PR comment), $report/report.json (numbers)"
exit "$status"
