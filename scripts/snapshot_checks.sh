#!/usr/bin/env bash
# Behaviour snapshot for refactors: every `check --json` (and `run`/`reference` output) of a fixed set of cases —
# the demo's forward, RMSNorm, Add & Norm, backward and quantized cases, plus every quantized scaling with --y
# consistency and the vllm recipe — written to one folder. Run it with the binary before and after a change and
# diff the folders: a refactor that claims "no behaviour change" shows none.
#   scripts/snapshot_checks.sh LNORM_BINARY OUT_DIR
set -euo pipefail
lnorm=$(realpath "$1"); out=$2
repo=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$out" && mkdir -p "$out" && cd "$out"
g() { "$lnorm" gen "$@" >/dev/null; }
g --out x.npy --gamma-out g.npy --beta-out b.npy --shape 64x1024 --seed 11
g --out xo.npy --shape 64x1024 --seed 11 --dist offset --offset 1e4
g --out xh.npy --gamma-out gh.npy --beta-out bh.npy --shape 64x1024 --dtype bf16 --seed 12
g --out r.npy --shape 64x1024 --seed 13
g --out dy.npy --shape 64x1024 --seed 14
n=0
c() {  # check with these flags; keep its JSON and text
  n=$((n + 1))
  "$lnorm" check "$@" --json "c$n.json" >"c$n.txt" 2>&1 || echo "exit $?" >>"c$n.txt"
}
for k in reference naive welford avx2 avx512 avx2_cr avx512_cr onepass; do
  run() { if [ $k = reference ]; then "$lnorm" reference "$@"; else "$lnorm" run --kernel $k "$@"; fi; }
  run --x x.npy --gamma g.npy --beta b.npy --y y.npy --mean m.npy --rstd s.npy 2>/dev/null || continue
  c --x x.npy --gamma g.npy --beta b.npy --y y.npy --mean m.npy --rstd s.npy --max-mean-ulp 4 --max-rstd-ulp 4
  run --x xo.npy --y y.npy && c --x xo.npy --y y.npy
  run --op rmsnorm --x xh.npy --gamma gh.npy --dtype bf16 --eps 1e-6 --y y.npy &&
    c --op rmsnorm --x xh.npy --gamma gh.npy --dtype bf16 --eps 1e-6 --y y.npy --max-ulp 8
  run --op rmsnorm --x x.npy --residual r.npy --gamma g.npy --y y.npy --h h.npy &&
    c --op rmsnorm --x x.npy --residual r.npy --gamma g.npy --y y.npy --h h.npy
  if run --dir bwd --x x.npy --gamma g.npy --beta b.npy --dy dy.npy --dx dx.npy --dgamma dg.npy --dbeta db.npy 2>/dev/null; then
    c --dir bwd --x x.npy --gamma g.npy --beta b.npy --dy dy.npy --dx dx.npy --dgamma dg.npy --dbeta db.npy
  fi
  for spec in "--quant fp8_e4m3 --scale 0.0078125" "--quant int8 --scaling row" "--quant fp8_e5m2 --scaling group:64" \
              "--quant fp8_e4m3 --scaling mx"; do
    # shellcheck disable=SC2086
    qy=(); [ $k = reference ] && qy=(--y qy.npy)  # the reference writes the y beside q; a kernel's run does not
    # shellcheck disable=SC2086
    run --op rmsnorm --x xh.npy --gamma gh.npy --dtype bf16 $spec --q q.npy --scales qs.npy "${qy[@]}" 2>/dev/null || continue
    # shellcheck disable=SC2086
    c --op rmsnorm --x xh.npy --gamma gh.npy --dtype bf16 $spec --q q.npy --scales qs.npy
    # shellcheck disable=SC2086
    [ -f qy.npy ] && c --op rmsnorm --x xh.npy --gamma gh.npy --dtype bf16 $spec --q q.npy --scales qs.npy --y qy.npy
    # shellcheck disable=SC2086
    c --op rmsnorm --x xh.npy --gamma gh.npy --dtype bf16 $spec --q q.npy --scales qs.npy --recipe vllm
  done
  for f in y m s h dx dg db q qs qy; do [ -f $f.npy ] && mv $f.npy "$k-$f.npy"; done
done
# Recipes on y (the demo's torch outputs) and LayerNorm's constant rows, reported and gated.
E=$repo/examples/recipes
for y in y_llama y_no_cast; do
  c --op rmsnorm --dtype bf16 --eps 1e-6 --x "$E/x.npy" --gamma "$E/w.npy" --y "$E/$y.npy" --recipe llama
  c --op rmsnorm --dtype bf16 --eps 1e-6 --x "$E/x.npy" --gamma "$E/w.npy" --y "$E/$y.npy" --recipe llama --max-ulp 8
done
g --out xc.npy --shape 16x256 --seed 15 --dist constant --offset 3.14159
"$lnorm" run --kernel naive --x xc.npy --y yc.npy
c --x xc.npy --y yc.npy
c --x xc.npy --y yc.npy --strict-constant-rows
rm -f x*.npy g*.npy b*.npy r.npy dy.npy
sed -i "s|$out|OUT|g" c*.txt c*.json 2>/dev/null || true
echo "snapshot: $n checks in $out"
