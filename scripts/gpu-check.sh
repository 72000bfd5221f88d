#!/usr/bin/env bash
# Runs on a GPU machine, from the repository root, what scripts/gpu-pack.sh put in .gpu/: the
# device, then every CUDA instance of the kernel suites (ops without a CUDA implementation yet
# skip, naming the op), the CUDA verifier tests, the model's device runtime on CUDA against the
# CPU path (tests/e2e/model/device_runtime_test.cpp) and the engine with model.device cuda
# (tests/e2e/spec/spec_cuda_test.cpp; fixtures are written to a temporary directory). Prints a
# summary line per suite; exits non-zero when a test failed. Writes the full logs to $OUT when
# the device tool sets it.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ ! -f "$root/.gpu/bundle.tgz" ]; then
  echo "gpu-check: $root/.gpu/bundle.tgz is missing: run scripts/gpu-pack.sh first and carry .gpu" >&2
  exit 2
fi
pack="$(mktemp -d)"
tar -C "$pack" -xzf "$root/.gpu/bundle.tgz"
logs="${OUT:-/tmp}"
export LD_LIBRARY_PATH="$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SPECD_TEST_PLUGIN_DIR="$pack/plugins" SPECD_PLUGIN_PATH="$pack/plugins"
export SPECD_TOKENIZER_ROOT="$pack/tokenizers" SPECD_TEST_WORK_DIR="$(mktemp -d)"
trap 'rm -rf "$pack" "$SPECD_TEST_WORK_DIR"' EXIT
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
run kernels "$pack/specd_kernels_test" --gtest_filter='*cuda*:*Cuda*'
run verifiers "$pack/verifier_test" --gtest_filter='*Cuda*'
run model_runtime "$pack/specd_model_e2e_test" --gtest_filter='*DeviceRuntime.*'
run engine "$pack/spec_e2e_test" --gtest_filter='*SpecDevice*'
exit $status
