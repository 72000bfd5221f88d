#!/usr/bin/env bash
# Runs on a GPU machine, from the repository root, what scripts/gpu-pack.sh put in .gpu/: the
# device, then every CUDA instance of the kernel suites (ops without a CUDA implementation yet
# skip, naming the op) and the CUDA verifier tests. Prints a summary line per suite; exits
# non-zero when a test failed. Writes the full logs to $OUT when the device tool sets it.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pack="$root/.gpu"
if [ ! -x "$pack/specd_kernels_test" ]; then
  echo "gpu-check: $pack is missing: run scripts/gpu-pack.sh first and carry .gpu" >&2
  exit 2
fi
logs="${OUT:-/tmp}"
export LD_LIBRARY_PATH="$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SPECD_TEST_PLUGIN_DIR="$pack/plugins"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || echo "gpu-check: nvidia-smi failed"
status=0
run() {
  local name="$1"
  shift
  echo "== $name"
  if timeout 240 "$@" > "$logs/$name.log" 2>&1; then
    grep -E '^\[  (PASSED|SKIPPED) \]' "$logs/$name.log" | grep -v '^\[  SKIPPED \] [A-Z]' | head -3
  else
    status=1
    grep -E '^\[  FAILED  \]|Failure|error' "$logs/$name.log" | head -40
  fi
  grep -cE '^\[  SKIPPED \] .*/cuda[^ ]* \(' "$logs/$name.log" | sed 's/^/cuda instances skipped: /'
  grep -B1 -E '^\[  SKIPPED \] .*/cuda[^ ]* \(' "$logs/$name.log" | grep -vE '^\[|^--$' | sort | uniq -c | head -10
}
run kernels "$pack/specd_kernels_test" --gtest_filter='*cuda*'
run verifiers "$pack/verifier_test" --gtest_filter='*Cuda*'
exit $status
