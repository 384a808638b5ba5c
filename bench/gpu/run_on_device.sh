#!/usr/bin/env bash
# The one GPU device check, for a session with an H200 (see bench/gpu/README.md). Run from
# the repository root on the device machine, after bench/gpu/prepare_carry.sh here, with
#   carry: [".gpu_carry"]   command: bash bench/gpu/run_on_device.sh   timeout_s: 540
# It writes 8 files, flat, into $OUT (or bench/results/gpu-DATE when run by hand), the device tool's
# limit (a ninth is not brought back):
#   run.log  tests.txt  verify.txt  verify.json  verify_add.txt  verify_add.json  gpu_bench.json  torch_layernorm.json
# The nvidia-smi line and the summary table (printed last) are in run.log only. Steps, each capped so one
# hang cannot eat the lease (150 + 180 + 90 + 90 s, under the 540 s call; expected ~4 minutes): the GPU tests (device bits == the CPU
# emulation's, 2^31+ elements, NaN rows, constant rows, ...), `lnorm verify` (full suite) on the three
# CUDA kernels, the CUDA benchmark against the device copy, torch.nn.functional.layer_norm on the
# same shapes, and the comparison with the targets of bench/gpu/README.md.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-bench/results/gpu-$(date -u +%Y%m%d)}
mkdir -p "$out"
exec > >(tee "$out/run.log") 2>&1
carry=.gpu_carry
# prepare_carry.sh packs the binaries and libraries (66 MiB unpacked, over the tool's 64 MiB limit).
if [ -f "$carry/bundle.tar.gz" ]; then tar -C "$carry" -xzf "$carry/bundle.tar.gz"; fi
export LD_LIBRARY_PATH="$PWD/$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
started=$(date +%s)
step() { echo; echo "== [$(( $(date +%s) - started )) s] $*"; }

step "device"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu \
  --format=csv

step "binaries"
have_lnorm=0
if [ -x "$carry/lnorm" ] && "$carry/lnorm" list >/dev/null 2>&1; then
  have_lnorm=1
  "$carry/lnorm" list
  bench="$carry/lnorm_gpu_bench"
else
  echo "prebuilt lnorm does not run here (missing .gpu_carry or a library): verify and the GPU tests are skipped;"
  echo "building the benchmark alone with nvcc"
  ldd "$carry/lnorm" 2>&1 | grep "not found" || true
  bench=/tmp/lnorm_gpu_bench
  # backward.cu alone with --fmad=false (kernels/CMakeLists.txt says why), then the rest and the link.
  timeout 120 nvcc -O3 -std=c++20 --fmad=false -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
    -Ikernels/include -Ikernels/cuda -c kernels/cuda/backward.cu -o /tmp/lnorm_backward.o &&
  timeout 240 nvcc -O3 -std=c++20 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
    -Ikernels/include -Ikernels/cuda bench/gpu/gpu_bench.cu kernels/cuda/runtime.cu kernels/cuda/naive.cu \
    kernels/cuda/group.cu kernels/cuda/block.cu /tmp/lnorm_backward.o kernels/cuda/launch_config.cpp kernels/problem.cpp \
    -o "$bench" || echo "nvcc build of the benchmark FAILED"
fi

if [ "$have_lnorm" = 1 ]; then
  step "GPU tests (tests/test_cuda_kernels.cpp)"
  timeout 150 "$carry/lnorm_cuda_probe" "$carry/test_cuda_kernels" --durations yes 2>&1 | tail -n 60 | tee "$out/tests.txt"
  echo "exit ${PIPESTATUS[0]}" | tee -a "$out/tests.txt"

  # The plain norms get the full suite; Add & Norm (whose new code is the sum, checked bit for bit in the
  # GPU tests above) the quick one at 12 cases, so both fit the device time (METHOD.md).
  step "lnorm verify, full suite, cuda_warp cuda_block cuda_naive (layernorm, rmsnorm)"
  timeout 180 "$carry/lnorm" verify --kernel cuda_warp --kernel cuda_block --kernel cuda_naive \
    --op layernorm --op rmsnorm --json "$out/verify.json" > "$out/verify.txt" 2>&1
  echo "exit $?" >> "$out/verify.txt"
  tail -n 25 "$out/verify.txt"
  step "lnorm verify, quick, cuda_warp cuda_block (add_layernorm, add_rmsnorm)"
  timeout 60 "$carry/lnorm" verify --kernel cuda_warp --kernel cuda_block --op add_layernorm --op add_rmsnorm \
    --quick --cases 12 --json "$out/verify_add.json" > "$out/verify_add.txt" 2>&1
  echo "exit $?" >> "$out/verify_add.txt"
  tail -n 5 "$out/verify_add.txt"
fi

step "CUDA benchmark (device-resident, vs device-to-device copy)"
timeout 90 "$bench" --shapes bench/gpu/shapes.txt --out "$out/gpu_bench.json" --reps 20

step "torch.nn.functional.layer_norm, same shapes"
timeout 90 python3 bench/gpu/torch_layernorm.py --shapes bench/gpu/shapes.txt --out "$out/torch_layernorm.json" --reps 20

step "summary (targets: >= 85% of copy, >= 1.1x torch)"
if [ -f "$out/gpu_bench.json" ] && [ -f "$out/torch_layernorm.json" ]; then
  python3 bench/gpu/compare.py "$out/gpu_bench.json" "$out/torch_layernorm.json"
fi
grep -E "^(PASS|FAIL|NOTHING)" "$out/verify.txt" "$out/verify_add.txt" 2>/dev/null
grep -E "test cases|^exit" "$out/tests.txt" 2>/dev/null
step "done"
