#!/usr/bin/env bash
# Set-up + the main job, told as a short story: builds lnorm, then one screen per step: the kernels
# here, their LayerNorm, RMSNorm, Add & Norm and backward accuracy against the exact reference, the verify gate's verdict per
# kernel x op x dtype, one
# benchmark shape beside the copy ceiling and oneDNN, select's pick, and the precision report's
# verdict per kernel. Every step's full output is kept under out/demo/ (the path is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" >/dev/null
lnorm=build/release/cli/lnorm
out=out/demo
rm -rf "$out" && mkdir -p "$out"
py=/usr/bin/python3  # Debian's (the first python3 on PATH may lack what install-deps installed)
status=0

echo "== 1. The kernels (lnorm list)"
"$lnorm" list | tee "$out/list.txt"
available=$("$lnorm" list | awk 'NR > 1 && $3 == "yes" { print $1 }')
echo

echo "== 2. Accuracy against the exact reference: max scaled ulp (lnorm run + lnorm check; 64x1024, eps 1e-5,"
echo "      random gamma/beta; budget 8 + 1*kappa; FAIL marks a kernel over it)"
# name  dtype  gen-flags
cases=(
  "centred   f32  --dist normal"
  "offset    f32  --dist offset --offset 1e4"
  "constant  f32  --dist constant --offset 3.14159"
  "centred   f16  --dist normal"
  "centred   bf16 --dist normal"
)
header=$(printf '%-10s' kernel)
for c in "${cases[@]}"; do read -r label dtype _ <<<"$c"; header+=$(printf ' %16s' "$label $dtype"); done
echo "$header"
for k in reference $available; do
  line=$(printf '%-10s' "$k")
  for c in "${cases[@]}"; do
    read -r label dtype flags <<<"$c"
    x="$out/$label-$dtype-x.npy"; g="$out/$label-$dtype-g.npy"; b="$out/$label-$dtype-b.npy"; y="$out/y.npy"
    # shellcheck disable=SC2086
    [ -f "$x" ] || "$lnorm" gen --out "$x" --gamma-out "$g" --beta-out "$b" --shape 64x1024 --dtype "$dtype" $flags
    if [ "$k" = reference ]; then "$lnorm" reference --x "$x" --gamma "$g" --beta "$b" --dtype "$dtype" --y "$y"
    else "$lnorm" run --kernel "$k" --x "$x" --gamma "$g" --beta "$b" --dtype "$dtype" --y "$y" 2>/dev/null || { line+=$(printf ' %16s' "-"); continue; }; fi
    "$lnorm" check --x "$x" --gamma "$g" --beta "$b" --dtype "$dtype" --y "$y" --json "$out/check.json" >>"$out/check.txt" || true
    # max_ulp is null where an output is NaN/Inf against a finite answer (a non-finite mismatch): "inf".
    line+=$(printf ' %16s' "$($py -c 'import json,sys; d=json.load(open(sys.argv[1])); m=d["max_ulp"]; print(("" if d["pass"] else "FAIL ") + ("inf" if m is None else format(m, ".3g")))' "$out/check.json")")
  done
  echo "$line"
done
rm -f "$out/y.npy" "$out/check.json"
echo "(onepass's E[x^2]-E[x]^2 and naive's sequential sum lose about kappa ulps on the offset rows; inf: NaN or Inf where"
echo " the exact answer is finite; full verdicts: $out/check.txt)"
echo

echo "== 3. RMSNorm (lnorm run --op rmsnorm + lnorm check --op rmsnorm; 64x1024, eps 1e-6, random gamma, no beta):"
echo "      max scaled ulp against the exact RMSNorm; budget 8; gemma: y uses (1 + gamma), --gamma-offset 1"
# name  dtype  extra-flags  gen-flags
rms_cases=(
  "centred  f32  -                 --dist normal"
  "huge     f32  -                 --dist normal --scale 1e20"
  "centred  bf16 -                 --dist normal"
  "gemma    bf16 --gamma-offset=1  --dist normal"
)
header=$(printf '%-10s' kernel)
for c in "${rms_cases[@]}"; do read -r label dtype _ <<<"$c"; header+=$(printf ' %16s' "$label $dtype"); done
echo "$header"
rms_kernels=$("$lnorm" list --json | $py -c 'import json,sys; print(" ".join(k["name"] for k in json.load(sys.stdin) if k["available"] and "rmsnorm" in k["ops"]))')
for k in reference $rms_kernels; do
  line=$(printf '%-10s' "$k")
  for c in "${rms_cases[@]}"; do
    read -r label dtype extra flags <<<"$c"
    [ "$extra" = - ] && extra=""
    x="$out/rms-$label-$dtype-x.npy"; g="$out/rms-$label-$dtype-g.npy"; y="$out/y.npy"
    # shellcheck disable=SC2086
    [ -f "$x" ] || "$lnorm" gen --out "$x" --gamma-out "$g" --shape 64x1024 --dtype "$dtype" $flags
    # shellcheck disable=SC2086
    if [ "$k" = reference ]; then "$lnorm" reference --op rmsnorm $extra --x "$x" --gamma "$g" --eps 1e-6 --dtype "$dtype" --y "$y"
    else "$lnorm" run --kernel "$k" --op rmsnorm $extra --x "$x" --gamma "$g" --eps 1e-6 --dtype "$dtype" --y "$y" 2>/dev/null || { line+=$(printf ' %16s' "-"); continue; }; fi
    # shellcheck disable=SC2086
    "$lnorm" check --op rmsnorm $extra --x "$x" --gamma "$g" --eps 1e-6 --dtype "$dtype" --y "$y" --max-ulp 8 --json "$out/check.json" >>"$out/check-rmsnorm.txt" || true
    line+=$(printf ' %16s' "$($py -c 'import json,sys; d=json.load(open(sys.argv[1])); m=d["max_ulp"]; print(("" if d["pass"] else "FAIL ") + ("inf" if m is None else format(m, ".3g")))' "$out/check.json")")
  done
  echo "$line"
done
rm -f "$out/y.npy" "$out/check.json"
echo "(huge: |x| ~ 1e20, where x^2 overflows f32: the textbook naive's sum of squares becomes Inf and y 0; the others"
echo " rescale such rows; full verdicts: $out/check-rmsnorm.txt)"
echo

echo "== 3b. Add & Norm (lnorm run --residual + lnorm check --residual --h; 64x1024 RMSNorm, eps 1e-6, random gamma):"
echo "      h = x + residual rounded once, then the norm of h; max scaled ulp of y / max ulp of h, against the exact answer"
$py scripts/demo_add_inputs.py "$out"
add_cases=("cancel f32" "stream bf16" "fp32res bf16")
header=$(printf '%-10s' kernel)
for c in "${add_cases[@]}"; do read -r label dtype <<<"$c"; header+=$(printf ' %20s' "$label $dtype"); done
echo "$header"
add_kernels=$("$lnorm" list --json | $py -c 'import json,sys; print(" ".join(k["name"] for k in json.load(sys.stdin) if k["available"] and "add_rmsnorm" in k["ops"]))')
for k in reference $add_kernels; do
  line=$(printf '%-10s' "$k")
  for c in "${add_cases[@]}"; do
    read -r label dtype <<<"$c"
    base="$out/add-$label-$dtype"
    flags=(--op rmsnorm --x "$base-x.npy" --residual "$base-r.npy" --gamma "$base-g.npy" --eps 1e-6 --dtype "$dtype")
    if [ "$k" = reference ]; then "$lnorm" reference "${flags[@]}" --y "$out/y.npy" --h "$out/h.npy"
    else "$lnorm" run --kernel "$k" "${flags[@]}" --y "$out/y.npy" --h "$out/h.npy" 2>/dev/null || { line+=$(printf ' %20s' "-"); continue; }; fi
    "$lnorm" check "${flags[@]}" --y "$out/y.npy" --h "$out/h.npy" --max-ulp 8 --max-h-ulp 0.5 --json "$out/check.json" >>"$out/check-add.txt" || true
    line+=$(printf ' %20s' "$($py -c 'import json,sys; d=json.load(open(sys.argv[1])); f=lambda m: "inf" if m is None else format(m, ".3g"); print(("" if d["pass"] else "FAIL ") + f(d["max_ulp"]) + " / " + f(d["h"]["max_ulp"]))' "$out/check.json")")
  done
  echo "$line"
done
rm -f "$out/y.npy" "$out/h.npy" "$out/check.json"
echo "(fp32res: an f32 residual beside bf16 x, flash-attn's residual_in_fp32; -: the kernel takes the residual in x's dtype"
echo " only; cancel: every h is exact, as a difference of near-equal values is; full verdicts: $out/check-add.txt)"
echo

echo "== 3c. Recipes (lnorm check --recipe llama; examples/recipes: torch's own bf16 RMSNorm outputs, 16x1024, eps 1e-6):"
echo "      is a kernel its model's answer? a Llama-style RMSNorm against its recipe and against the exact RMSNorm"
E=examples/recipes
for y in y_llama y_no_cast; do
  "$lnorm" check --op rmsnorm --dtype bf16 --eps 1e-6 --x $E/x.npy --gamma $E/w.npy --y $E/$y.npy --recipe llama \
    --json "$out/recipe.json" >/dev/null || true
  $py -c 'import json,sys; d=json.load(open(sys.argv[1])); r=d["recipe"]; print("  %-10s %s  %.3g ulp from the llama recipe (%.1f%% correctly rounded to it), %.3g from the exact rmsnorm" % (sys.argv[2], "PASS" if d["pass"] else "FAIL", r["max_ulp"], 100 * r["correctly_rounded"], d["max_ulp"]))' "$out/recipe.json" "$y"
done
rm -f "$out/recipe.json"
echo "(y_no_cast skips LlamaRMSNorm's cast of the normalized value to bf16: correctly rounded, but not the model's answer)"
echo

echo "== 3d. Backward (lnorm run --dir bwd + lnorm check --dir bwd; 256x1024 f32 LayerNorm, eps 1e-5, random gamma/beta,"
echo "      dy ~ N(0, 1)): max scaled ulp of dx / dgamma / dbeta against the exact gradients; budget 8 + 1*kappa"
"$lnorm" gen --out "$out/bx.npy" --shape 256x1024 --seed 21 --gamma-out "$out/bg.npy" --beta-out "$out/bb.npy" >/dev/null
"$lnorm" gen --out "$out/bxo.npy" --shape 256x1024 --seed 21 --dist offset --offset 1e3 >/dev/null
"$lnorm" gen --out "$out/bdy.npy" --shape 256x1024 --seed 22 >/dev/null
printf "  %-8s %-24s %-24s\n" kernel "normal rows" "offset rows (kappa ~1e3)"
for k in welford naive avx2 avx512; do
  line=$(printf "  %-8s" "$k")
  for x in bx bxo; do
    in="--x $out/$x.npy --gamma $out/bg.npy --beta $out/bb.npy --dy $out/bdy.npy"
    outs="--dx $out/bdx.npy --dgamma $out/bdg.npy --dbeta $out/bdb.npy"
    if "$lnorm" run --kernel "$k" --dir bwd $in $outs 2>/dev/null; then
      "$lnorm" check --dir bwd $in $outs --json "$out/bcheck.json" >>"$out/check-bwd.txt" 2>&1 || true
      cell=$($py -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%s %.3g/%.3g/%.3g" % ("PASS" if d["pass"] else "FAIL", d["dx"]["max_finite_ulp"], d["dgamma"]["max_finite_ulp"], d["dbeta"]["max_finite_ulp"]))' "$out/bcheck.json")
    else
      cell="-"
    fi
    line+=$(printf " %-24s" "$cell")
  done
  echo "$line"
done
rm -f "$out"/b*.npy "$out/bcheck.json"
echo "(welford recomputes the statistics in f64; naive takes the forward's saved f32 mean as it is, whose rounding costs"
echo " about kappa ulps on offset rows, as torch's backward does; avx2 and avx512 take it too but make it exact with one"
echo " more sum; -: not available here; full verdicts: $out/check-bwd.txt)"
echo

echo "== 3e. Quantized outputs (lnorm run --quant + lnorm check --quant; 64x1024 bf16, random gamma): q = Q(y/s) rounded"
echo "      once, saturating; max error in quanta of the format at y*/s and the share bit-identical to the exact q"
"$lnorm" gen --out "$out/qx.npy" --shape 64x1024 --dtype bf16 --seed 31 --gamma-out "$out/qg.npy" --beta-out "$out/qb.npy" >/dev/null
# vLLM's rms_norm_static_fp8_quant: a static f32 scale (2^-7: y's tails past 3.5 saturate at 448);
# its rms_norm_dynamic_per_token_quant form, on a LayerNorm: int8 with a per-row scale amax/127.
static="--op rmsnorm --eps 1e-6 --x $out/qx.npy --gamma $out/qg.npy --dtype bf16 --quant fp8_e4m3 --scale 0.0078125"
token="--op layernorm --x $out/qx.npy --gamma $out/qg.npy --beta $out/qb.npy --dtype bf16 --quant int8 --scaling row"
printf "  %-10s %-28s %-28s\n" kernel "static fp8_e4m3 RMSNorm" "per-token int8 LayerNorm"
q_cell() {  # check's verdict, max quanta and correctly rounded share, from its JSON
  "$lnorm" check "$@" --json "$out/qcheck.json" >>"$out/check-quant.txt" 2>&1 || true
  $py -c 'import json,sys; d=json.load(open(sys.argv[1]))["q"]; m=d["max_ulp"]; print("%s %s q, %.2f%% CR" % ("PASS" if d["pass"] else "FAIL", "inf" if m is None else format(m, ".3g"), 100 * d["correctly_rounded"]))' "$out/qcheck.json"
}
quant_kernels=$("$lnorm" list --json | $py -c 'import json,sys; print(" ".join(k["name"] for k in json.load(sys.stdin) if k["available"] and k["quantized"]))')
for k in reference $quant_kernels; do
  line=$(printf "  %-10s" "$k")
  for case in static token; do
    flags=${!case}
    scales=""; [ "$case" = token ] && scales="--scales $out/qs.npy"
    # shellcheck disable=SC2086
    if [ "$k" = reference ]; then "$lnorm" reference $flags --q "$out/qq.npy" $scales
    else "$lnorm" run --kernel "$k" $flags --q "$out/qq.npy" $scales; fi
    # shellcheck disable=SC2086
    line+=$(printf " %-28s" "$(q_cell $flags --q "$out/qq.npy" $scales)")
  done
  echo "$line"
done
# A kernel that truncates y/s toward zero instead of rounding it (a float -> int8 cast): the gate fails it.
# shellcheck disable=SC2086
"$lnorm" reference $token --q "$out/qq.npy" --scales "$out/qs.npy" --y "$out/qy.npy"
$py - "$out" <<'PYEOF'
import sys
import numpy as np
out = sys.argv[1]
y = (np.load(f"{out}/qy.npy").astype(np.uint32) << 16).view(np.float32)  # y in bf16, widened
s = np.load(f"{out}/qs.npy")
np.save(f"{out}/qt.npy", np.clip(np.trunc(y / s), -128, 127).astype(np.int8))
# vLLM's per-token int8 arithmetic: s = f32(amax(y in bf16)) / 127, q = round-half-even(f32(y * f32(1/s))).
sv = (np.abs(y).max(axis=1, keepdims=True) / np.float32(127)).astype(np.float32)
np.save(f"{out}/qvs.npy", sv)
np.save(f"{out}/qv.npy", np.clip(np.rint((y * (np.float32(1) / sv)).astype(np.float32)), -128, 127).astype(np.int8))
PYEOF
# shellcheck disable=SC2086
echo "  truncates  $(printf '%-28s' -) $(q_cell $token --q "$out/qt.npy" --scales "$out/qs.npy")"
# The same vLLM arithmetic against its recipe (check --recipe vllm: the recipe's rounding points, at most 0.5 quantum).
# shellcheck disable=SC2086
"$lnorm" check $token --q "$out/qv.npy" --scales "$out/qvs.npy" --recipe vllm --json "$out/qcheck.json" >>"$out/check-quant.txt" 2>&1 || true
echo "  vllm int8  $(printf '%-28s' -) $($py -c 'import json,sys; d=json.load(open(sys.argv[1])); q=d["q"]; r=d["recipe"]; print("%s %.3g q, %.2f%% CR; recipe vllm %s %.3g, %.2f%% its codes" % ("PASS" if q["pass"] else "FAIL", q["max_ulp"], 100 * q["correctly_rounded"], "PASS" if r["pass"] else "FAIL", r["max_ulp"], 100 * r["matching"]))' "$out/qcheck.json")"
rm -f "$out"/q*.npy "$out/qcheck.json"
echo "(the exact answer reads at most 0.5 quantum, 100% CR, and so do the _cr kernels; a kernel's f32 y moves a near-tie's q"
echo " now and then; budget: 0.5 quantum + what rounding y to bf16 first can move y/s, so vLLM's arithmetic (y in bf16 times"
echo " f32(1/s)) passes, and is 0.5 from its own recipe, while truncation fails; full verdicts: $out/check-quant.txt)"
echo

echo "== 3f. NVFP4 (--quant fp4_e2m1 --scaling nvfp4; 64x1024 bf16 RMSNorm): E2M1 values two a byte, an E4M3 scale per 16,"
echo "      c = E4M3(amax*G/6), G the tensor's own 2688/amax|y*|; then a kernel whose block scale truncates"
"$lnorm" gen --out "$out/nx.npy" --shape 64x1024 --dtype bf16 --seed 37 --gamma-out "$out/ng.npy" >/dev/null
nv="--op rmsnorm --eps 1e-6 --x $out/nx.npy --gamma $out/ng.npy --dtype bf16 --quant fp4_e2m1 --scaling nvfp4"
nv_cell() {  # check's verdict on q and the block scales, from its JSON
  "$lnorm" check "$@" --json "$out/ncheck.json" >>"$out/check-nvfp4.txt" 2>&1 || true
  $py -c 'import json,sys; d=json.load(open(sys.argv[1])); q=d["q"]; s=d["scales"]; m=q["max_ulp"]; print("%s  q %s quanta, %.2f%% CR; block scales max %g E4M3 steps, %d over" % ("PASS" if d["pass"] else "FAIL", "inf" if m is None else format(m, ".3g"), 100 * q["correctly_rounded"], s["max_ulp"], s["over_budget"]))' "$out/ncheck.json"
}
for k in reference $quant_kernels; do
  # shellcheck disable=SC2086
  if [ "$k" = reference ]; then "$lnorm" reference $nv --q "$out/nq.npy" --scales "$out/ns.npy" 2>/dev/null
  else "$lnorm" run --kernel "$k" $nv --q "$out/nq.npy" --scales "$out/ns.npy" 2>/dev/null; fi
  # shellcheck disable=SC2086
  printf "  %-10s %s\n" "$k" "$(nv_cell $nv --q "$out/nq.npy" --scales "$out/ns.npy")"
done
# A planted bug: the block scale E4M3(amax*G/6) rounded toward zero (a round-toward-zero conversion), q then computed
# consistently from that scale, round to nearest even: the gate fails the scales, and q with them.
# shellcheck disable=SC2086
G=$("$lnorm" reference $nv --q "$out/nq.npy" --scales "$out/ns.npy" --y "$out/ny.npy" 2>&1 >/dev/null | sed -n 's/^nvfp4: global scale \([^ ]*\) .*/\1/p')
$py - "$out" "$G" <<'PYEOF'
import sys
import numpy as np
out, G = sys.argv[1], np.float32(sys.argv[2])
y = (np.load(f"{out}/ny.npy").astype(np.uint32) << 16).view(np.float32).astype(np.float64)  # y* in bf16, widened
def e4m3(c):  # positive E4M3 codes' values: bias 7, 3 mantissa bits
    e, m = (c >> 3) & 15, (c & 7).astype(np.float64)
    return np.where(e == 0, m / 8 * 2.0 ** -6, (1 + m / 8) * 2.0 ** (e.astype(np.float64) - 7))
c = np.load(f"{out}/ns.npy").astype(np.int64)
amax = np.abs(y).reshape(c.shape[0], -1, 16).max(axis=2)
c = np.where((e4m3(c) > amax * np.float64(G) / 6) & (c > 0), c - 1, c)  # toward zero where it rounded up
s = (e4m3(c).astype(np.float32) / G).astype(np.float32)
t = np.abs(y.reshape(c.shape[0], -1, 16) / s[..., None]).reshape(y.shape)
mids = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5])  # between E2M1's 0, 0.5, 1, 1.5, 2, 3, 4, 6
k = np.searchsorted(mids, t, side="left")  # the code of the nearest value (past 5: 6, saturating)
tie = (k < 7) & (t == mids[np.minimum(k, 6)])
k = np.where(tie & (k % 2 == 1), k + 1, k)  # ties to the even code
codes = (k | np.where(y < 0, 8, 0)).astype(np.uint8)
np.save(f"{out}/npq.npy", (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8))
np.save(f"{out}/nps.npy", c.astype(np.uint8))
PYEOF
# shellcheck disable=SC2086
printf "  %-10s %s\n" "truncated" "$(nv_cell $nv --q "$out/npq.npy" --scales "$out/nps.npy")"
rm -f "$out"/n*.npy "$out/ncheck.json"
echo "(the _cr kernels write the reference's bits, the fast ones quantize their f32 y; the truncated block scale is one E4M3"
echo " step low on about half the blocks: the scale gate fails it, while its q, rounded from the bf16 y under that scale,"
echo " is within a hair of y*/s there; full verdicts: $out/check-nvfp4.txt)"
echo

echo "== 4. The CI gate (lnorm verify --quick): each op's properties x every kernel x op x dtype, against property_tests/budgets.toml"
"$lnorm" verify --quick --json "$out/verify.json" >"$out/verify.txt" 2>&1 || status=$?
$py - "$out/verify.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
rows = {}
for r in d["results"]:
    rows.setdefault((r["kernel"], r.get("op", "layernorm"), r["dtype"]), []).append(r)
print(f"{'kernel':<10} {'op':<13} {'dtype':<5} {'passed':>6} {'xfail':>5}  failed")
unavailable = {}
for (k, op, t), rs in rows.items():
    n = lambda *s: sum(r["status"] in s for r in rs)
    if n("skipped") == len(rs):  # not runnable here: one line per reason below
        unavailable.setdefault(rs[0]["message"], []).append(k)
        continue
    bad = [r["property"] for r in rs if r["status"] in ("FAIL", "XPASS", "MISTRUSTED")]
    print(f"{k:<10} {op:<13} {t:<5} {n('pass'):>6} {n('xfail', 'xpass?'):>5}  {', '.join(bad) or '-'}")
for why, ks in unavailable.items():
    print(f"skipped here: {', '.join(dict.fromkeys(ks))}: {why}")
EOF
tail -1 "$out/verify.txt"
echo "(xfail: the cautionary kernels' expected failures, each with its reason; full table: $out/verify.txt)"
echo

echo "== 5. Speed (lnorm bench --shape 4096x1024 --dtype f32): GB/s beside the copy ceiling and oneDNN, one thread"
"$lnorm" bench --shape 4096x1024 --dtype f32 --json "$out/bench.json" 2>&1 | tee "$out/bench.txt" || status=$?
echo "(bench/README.md explains the columns; all shapes: lnorm bench --quick)"
echo

echo "== 6. Which kernel to use (lnorm select --shape 4096x1024 --dtype f32 --max-ulp 12)"
"$lnorm" select --shape 4096x1024 --dtype f32 --max-ulp 12 2>&1 | tee "$out/select.txt" || status=$?
echo

echo "== 7. Precision report (lnorm report --quick): LayerNorm's error against kappa, width, eps/var and input class;"
echo "      RMSNorm's against width, eps/mean(x^2), the row's magnitude and input class"
"$lnorm" report --quick --out "$out/report" >"$out/report.txt" 2>&1 || status=$?
# Its Verdicts section (the document's first): one line per kernel, PASS / FAIL / EXPECTED FAILURE / NOT MEASURED.
sed -n '/^## Verdicts/,/^## /p' "$out/report/report.md" | sed '$d'
echo "open $out/report/index.html (plots, tables), $out/report/report.md (for a PR comment), $out/report/report.json (numbers)"
exit "$status"
