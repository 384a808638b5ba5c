#!/usr/bin/env bash
# A fault-injection pass over the CLI: plugins that crash, throw, hang, write out of bounds, touch their
# const input or load badly, in every command that takes --plugin; outputs onto inputs (by path, symlink and hard
# link); a full disk (a 64 KiB tmpfs, where this user may mount one); SIGINT, SIGTERM and SIGHUP mid-run. Each probe
# says what the contract is and checks it: the exit status (never a signal's, 128 + n), a message naming the fault,
# the folder holding exactly what it held before (no output, no half of a set, no temporary), the inputs' bytes
# unchanged, no lnorm process left behind. Prints one line per probe and the count; exits 1 if any failed.
#   scripts/fault_probes.sh [build folder, default build/release]
# The plugins are the tests' (tests/plugins/misbehaving.cpp): build the tree first.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
lnorm=$PWD/$build/cli/lnorm
plugins=$PWD/$build/tests
for f in "$lnorm" "$plugins"/test_plugin_fault_{throws,oob,hang,dup,static,touches}.so "$plugins"/test_plugin_crashy.so; do
  [[ -e $f ]] || { echo "fault_probes: $f is missing: build $build first" >&2; exit 2; }
done
T=$(mktemp -d /tmp/lnorm-probes.XXXXXX)
trap 'umount "$T/full" 2>/dev/null; rm -rf "$T"' EXIT
work=$T/w
mkdir -p "$work"
"$lnorm" gen --out "$work/x.npy" --gamma-out "$work/g.npy" --shape 8x64 >/dev/null
"$lnorm" gen --out "$T/big.npy" --shape 2048x4096 >/dev/null  # 32 MiB: more than the full-disk tmpfs holds
passed=0
failed=0
declare -a failures=()
# ok NAME / not_ok NAME WHY: one probe's outcome, counted and printed.
ok() {
  passed=$((passed + 1))
  echo "ok    $1"
}
not_ok() {
  failed=$((failed + 1))
  failures+=("$1: $2")
  echo "FAIL  $1: $2"
}

# The folder's names and each file's checksum.
state() { (cd "$1" && find . -mindepth 1 -printf '%P\n' | sort | while read -r f; do [[ -f $f ]] && echo "$f $(md5sum <"$f")" || echo "$f"; done); }

# probe NAME ALLOWED_CODES MUST_SAY COMMAND...: run COMMAND in $work (time limit 120 s); it must exit with one of
# ALLOWED_CODES (space-separated), print MUST_SAY (a grep -E pattern; '' for anything), and leave $work as it was.
probe() {
  local name=$1 codes=$2 say=$3
  shift 3
  local before after out code
  before=$(state "$work")
  out=$(cd "$work" && timeout -k 5 120 "$@" 2>&1)
  code=$?
  after=$(state "$work")
  local why=""
  [[ " $codes " == *" $code "* ]] || why="exit $code, expected one of: $codes"
  [[ -z $why && -n $say ]] && ! grep -qE -- "$say" <<<"$out" && why="did not say /$say/"
  [[ -z $why && $before != "$after" ]] && why="the folder changed: $(diff <(echo "$before") <(echo "$after") | tr '\n' ' ')"
  [[ -z $why ]] && pgrep -f "$lnorm" >/dev/null && why="an lnorm process is still running" && pkill -KILL -f "$lnorm"
  if [[ -z $why ]]; then
    ok "$name"
  else
    not_ok "$name" "$why"
    sed 's/^/        /' <<<"$out" | head -5
  fi
}

# --- Plugins that fault, in every command that loads one. A fault is exit 1 naming the plugin's kernel (or the
# library, for one that crashes while loading; 2 for a declaration lnorm refuses), nothing written.
x=$work/x.npy
declare -A kernel=([throws]=faulty:throws [oob]=faulty:oob [touches]=faulty:touches [crashy]=crashy:segv)
# The verdict commands (bench, select, report, verify) write their result files with the kernel's row marked: those
# go to $T/out and must name the failure; $work must not change.
out=$T/out
mkdir -p "$out"
# verdict NAME FILE PATTERN: FILE exists and matches PATTERN (grep -E). A crash (oob, crashy) ends the whole command's
# child: exit 1 naming the kernel and no file at all, checked by verdict_or_none.
verdict_or_none() {
  if [[ $f == oob || $f == crashy ]]; then
    if [[ -z $(ls -A "$out") ]]; then
      ok "$1: nothing written after the crash"
    else
      not_ok "$1" "written after a crash: $(ls -A "$out")"
    fi
    rm -rf "${out:?}"/*
  else
    verdict "$@"
  fi
}
verdict() {
  if [[ -f $2 ]] && grep -qE -- "$3" "$2"; then
    ok "$1"
  else
    not_ok "$1" "$2 missing or without /$3/"
  fi
  rm -rf "${out:?}"/*
}
for f in throws oob touches crashy; do
  so=$plugins/test_plugin_fault_$f.so
  [[ $f == crashy ]] && so=$plugins/test_plugin_crashy.so
  k=${kernel[$f]}
  fault_codes="1"
  [[ $f == touches ]] && fault_codes="0 1"  # run alone cannot see x touched in its own memory; the file must not change
  run_says=${k#*:}
  [[ $f == touches ]] && run_says=""
  probe "run, plugin $f" "$fault_codes" "$run_says" "$lnorm" run --plugin "$so" --kernel "$k" --x "$x" --y "$out/y.npy"
  [[ $f == touches ]] && rm -f "$out/y.npy"
  [[ -e $out/y.npy ]] && not_ok "run, plugin $f" "y.npy written"
  bench_codes="1"
  [[ $f == touches ]] && bench_codes="0"  # bench times; it does not judge
  probe "bench, plugin $f" "$bench_codes" "" "$lnorm" bench --plugin "$so" --kernel "$k" --shape 8x64 --dtype f32 --quick --json "$out/b.json"
  [[ $f == touches ]] && rm -rf "${out:?}"/* || verdict_or_none "bench's JSON marks $k failed" "$out/b.json" '"failed": true'
  select_codes="0 1"
  [[ $f == oob || $f == crashy ]] && select_codes="1"
  probe "select, plugin $f" "$select_codes" "" "$lnorm" select --plugin "$so" --shape 8x64 --dtype f32 --json "$out/s.json"
  verdict_or_none "select's JSON written beside plugin $f" "$out/s.json" '"recommend|"choice|"kernel'
  probe "report, plugin $f" "0 1" "" "$lnorm" report --plugin "$so" --kernel "$k" --dtype f32 --quick --no-render --out "$out/r"
  [[ $f == touches ]] && rm -rf "${out:?}"/* || verdict_or_none "report's JSON has $k's error cells" "$out/r/report.json" '"status": "error"'
  probe "verify, plugin $f" "1" "$k|${k#*:}" "$lnorm" verify --plugin "$so" --kernel "$k" --quick --cases 3 --json "$out/v.json"
  verdict "verify's JSON fails $k" "$out/v.json" '"status": "FAIL"'
  probe "list, plugin $f" "0" "" "$lnorm" list --plugin "$so"
done
probe "list, a library that crashes while loading" "1" "test_plugin_fault_static" "$lnorm" list --plugin "$plugins/test_plugin_fault_static.so"
probe "run, a library that crashes while loading" "1" "test_plugin_fault_static" "$lnorm" run --plugin "$plugins/test_plugin_fault_static.so" --kernel naive --x "$x" --y "$T/w/y.npy"
probe "verify, a library that crashes while loading" "1" "test_plugin_fault_static" "$lnorm" verify --plugin "$plugins/test_plugin_fault_static.so" --kernel naive --quick --json "$out/v.json"
[[ -e $out/v.json ]] && not_ok "verify, a library that crashes while loading" "v.json written"
probe "list, two kernels of one name" "2" "faulty:dup" "$lnorm" list --plugin "$plugins/test_plugin_fault_dup.so"
probe "verify, a kernel that hangs (--case-timeout 1)" "1" "faulty:hang" "$lnorm" verify --plugin "$plugins/test_plugin_fault_hang.so" --kernel faulty:hang --property shape --quick --cases 2 --case-timeout 1 --json "$out/v.json"
verdict "verify's JSON fails the hanging case" "$out/v.json" 'longer than --case-timeout' 
probe "verify, a kernel that touches its const x, is failed naming x" "1" "modified x|x was modified|changed x" "$lnorm" verify --plugin "$plugins/test_plugin_fault_touches.so" --kernel faulty:touches --quick --cases 3

# --- An output that is an input: refused (exit 2, "is also an input") before anything is written.
ln -s "$x" "$T/x_link.npy"
ln "$x" "$T/x_hard.npy"
mv "$T/x_link.npy" "$T/x_hard.npy" "$work/"
for y in x.npy x_link.npy x_hard.npy; do
  probe "run --y onto x ($y)" "2" "is also an input" "$lnorm" run --kernel naive --x "$x" --y "$work/$y"
  probe "reference --mean onto x ($y)" "2" "is also an input" "$lnorm" reference --x "$x" --y "$T/w/y.npy" --mean "$work/$y"
  probe "gen --gamma-out onto its --out ($y)" "2" "is also|same file|twice" "$lnorm" gen --out "$work/$y" --gamma-out "$x" --shape 8x64
  probe "bench --json onto its plugin ($y)" "2" "is also an input" "$lnorm" bench --plugin "$plugins/test_plugin_demo.so" --shape 8x64 --quick --json "$plugins/test_plugin_demo.so"
done

# --- A full disk: every output of a set, or none, and no temporary.
if mkdir -p "$T/full" && mount -t tmpfs -o size=64k tmpfs "$T/full" 2>/dev/null; then
  full=$T/full
  fullprobe() {
    local name=$1
    shift
    local out code
    out=$(timeout -k 5 120 "$@" 2>&1)
    code=$?
    local left
    left=$(ls -A "$full")
    if [[ $code -ne 0 && $code -lt 128 && -z $left ]]; then
      ok "$name"
    else
      not_ok "$name" "exit $code, left: $left"
    fi
    rm -rf "${full:?}"/* "$full"/.[!.]* 2>/dev/null
  }
  fullprobe "full disk: gen x and gamma" "$lnorm" gen --out "$full/x.npy" --gamma-out "$full/g.npy" --shape 64x1024
  fullprobe "full disk: reference y and mean" "$lnorm" reference --x "$T/big.npy" --y "$full/y.npy" --mean "$full/m.npy"
  fullprobe "full disk: run --quant q and scales" "$lnorm" run --kernel naive --x "$T/big.npy" --quant int8 --scaling row --q "$full/q.npy" --scales "$full/s.npy"
  fullprobe "full disk: reference --dir bwd dx and dgamma" "$lnorm" reference --dir bwd --x "$T/big.npy" --dy "$T/big.npy" --dx "$full/dx.npy" --dgamma "$full/dg.npy"
  fullprobe "full disk: verify --json" "$lnorm" verify --kernel naive --quick --json "$full/v.json"
  umount "$full"
else
  echo "skip  full disk: this user cannot mount a tmpfs"
fi

# --- Signals mid-run: no output, no temporary, no child left. gen of a 1 GiB x is still writing when the signal
# comes (0.7 s in); verify over a hanging kernel is inside its sandboxed child.
# sigprobe NAME SIGNAL COMMAND...: COMMAND in a fresh folder, SIGNAL after 0.7 s; the folder must be empty after.
sigprobe() {
  local name=$1 sig=$2
  shift 2
  local d=$T/sig
  rm -rf "$d" && mkdir -p "$d"
  (cd "$d" && exec "$@") >/dev/null 2>&1 &
  local pid=$!
  sleep 0.7
  local was_running=yes
  kill -s "$sig" "$pid" 2>/dev/null || was_running=no
  wait "$pid"
  local code=$?
  sleep 0.5
  local left
  left=$(ls -A "$d")
  if [[ $was_running == yes && -z $left ]] && ! pgrep -f "$lnorm" >/dev/null; then
    ok "SIG$sig $name (exit $code)"
  else
    not_ok "SIG$sig $name" "exit $code, running when signalled: $was_running, left: $left"
    pkill -KILL -f "$lnorm"
  fi
}
for sig in INT TERM HUP; do
  sigprobe "during gen of a 1 GiB x and its gamma" "$sig" "$lnorm" gen --out "$T/sig/x.npy" --gamma-out "$T/sig/g.npy" --shape 16384x16384
  sigprobe "to verify over a hanging kernel" "$sig" "$lnorm" verify --plugin "$plugins/test_plugin_fault_hang.so" --kernel faulty:hang --property shape --quick --cases 2 --json "$T/sig/v.json"
done

echo "fault_probes: $((passed + failed)) probes, $passed kept the contract, $failed did not"
for f in "${failures[@]}"; do echo "  $f"; done
[[ $failed -eq 0 ]]
