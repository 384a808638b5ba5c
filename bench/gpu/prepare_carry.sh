#!/usr/bin/env bash
# Run HERE (the development machine, no GPU) before a device session: builds a preset with the CUDA
# kernels (default `release`, which has them whenever nvcc is found; `cuda` requires nvcc) and gathers what run_on_device.sh needs into .gpu_carry/ (ignored by git): the binaries, stripped, and
# the Debian shared libraries they load that the device image lacks (oneDNN, Google Benchmark,
# toml++, OpenCL, libgomp). The device machine cannot install packages, so the full lnorm (verify,
# the GPU tests) can only run there from this folder. Then call the device tool with
#   bench/gpu/prepare_carry.sh [PRESET]
#   carry: [".gpu_carry"]   command: bash bench/gpu/run_on_device.sh   timeout_s: 540
set -euo pipefail
cd "$(dirname "$0")/../.."
preset=${1:-release}
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j2 --target lnorm test_cuda_kernels lnorm_cuda_probe lnorm_gpu_bench
rm -rf .gpu_carry
mkdir -p .gpu_carry/lib
bins=("build/$preset/cli/lnorm" "build/$preset/tests/test_cuda_kernels" "build/$preset/tests/lnorm_cuda_probe"
      "build/$preset/bench/gpu/lnorm_gpu_bench")
cp "${bins[@]}" .gpu_carry/
strip .gpu_carry/lnorm .gpu_carry/test_cuda_kernels .gpu_carry/lnorm_cuda_probe .gpu_carry/lnorm_gpu_bench
# Every library outside glibc/libstdc++/libgcc (which the device image has, newer).
for b in "${bins[@]}"; do ldd "$b"; done | awk '/=> \// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux-x86-64)\.so' |
  while read -r lib; do cp -L "$lib" .gpu_carry/lib/; done
# Uncompressed this is ~66 MiB (libdnnl.so alone is 40), over the device tool's 64 MiB for the whole
# working tree; gzip brings it to ~21 MiB. run_on_device.sh unpacks it in place (gzip: every image has it).
tar -C .gpu_carry -cf - lnorm test_cuda_kernels lnorm_cuda_probe lnorm_gpu_bench lib | gzip -9 > /tmp/lnorm_gpu_carry.tar.gz
rm -rf .gpu_carry/*
mv /tmp/lnorm_gpu_carry.tar.gz .gpu_carry/bundle.tar.gz
du -sh .gpu_carry
echo "prepare_carry: ready; the device tool's working-tree limit is 64 MiB in all"
