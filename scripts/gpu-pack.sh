#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh runs on a GPU machine (the `device` tool's machine has CUDA
# 13 and its driver but none of specd's Debian libraries) into .gpu/ (git-ignored): the kernel
# suite and the verifier suite built here with nvcc, the verifier plugins, and the shared
# libraries they load that are not glibc's. Then, with the device tool:
#   run(command="bash scripts/gpu-check.sh", carry=[".gpu"], timeout_s=360)
# Usage: scripts/gpu-pack.sh [BUILD_DIR]   (default build/release, configured with SPECD_CUDA=AUTO|ON)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "${1:-$root/build/release}" && pwd)"
if ! grep -q '^SPECD_WITH_CUDA:.*=ON' "$build/CMakeCache.txt" 2>/dev/null &&
  ! grep -q 'SPECD_WITH_CUDA=1' "$build/build.ninja" 2>/dev/null; then
  echo "gpu-pack: $build is not a CUDA build (configure with -DSPECD_CUDA=ON and nvcc present)" >&2
  exit 1
fi
echo "gpu-pack: building the CUDA-instantiated suites in $build"
cmake --build "$build" --target specd_kernels_test verifier_test specd_verifier_rejection \
  specd_verifier_typical_acceptance specd_verifier_greedy
out="$root/.gpu"
rm -rf "$out"
mkdir -p "$out/lib" "$out/plugins"
cp "$build/bin/specd_kernels_test" "$build/bin/verifier_test" "$out/"
cp "$build"/lib/specd/plugins/specd_verifier_{rejection,typical_acceptance,greedy}.so "$out/plugins/"
# Every library the binaries and plugins load, except glibc's, the compiler runtime's (the
# machine's own are newer) and the driver's.
for f in "$out"/specd_kernels_test "$out"/verifier_test "$out"/plugins/*.so; do
  ldd "$f" | awk '$3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | ld-linux* | libcuda.so* | libstdc++.so* | libgcc_s.so*) ;;
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
du -sh "$out"
echo "gpu-pack: .gpu/ ready; on the GPU machine: bash scripts/gpu-check.sh (carry .gpu)"
