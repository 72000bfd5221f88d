#!/usr/bin/env bash
# Runs on a GPU machine, from the repository root, what scripts/gpu-pack.sh put in .gpu/: the
# device, then every CUDA instance of the kernel suites (ops without a CUDA implementation yet
# skip, naming the op), the CUDA verifier tests, the model's device runtime on CUDA against the
# CPU path (tests/e2e/model/device_runtime_test.cpp), the engine with model.device cuda
# (tests/e2e/spec/spec_cuda_test.cpp; fixtures are written to a temporary directory), then the
# bench rows and the transformers oracle (scripts/gpu-bench.sh). Prints a summary line per
# suite; exits non-zero when a test failed. The full logs go to $OUT/gpu-check-logs.tgz when the
# device tool sets OUT (it returns at most 8 files), else to /tmp/gpu-check-logs.
# The whole check stays within 6 minutes: each part has its own time limit (GPU_CHECK_SECONDS,
# default 330, bounds the bench part's end; GPU_CHECK_NCU=0 skips the profile).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ ! -f "$root/.gpu/bundle.tgz" ]; then
  echo "gpu-check: $root/.gpu/bundle.tgz is missing: run scripts/gpu-pack.sh first and carry .gpu" >&2
  exit 2
fi
pack="$(mktemp -d)"
tar -C "$pack" -xzf "$root/.gpu/bundle.tgz"
logs="$(mktemp -d)"
export LD_LIBRARY_PATH="$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SPECD_TEST_PLUGIN_DIR="$pack/plugins" SPECD_PLUGIN_PATH="$pack/plugins"
export SPECD_TOKENIZER_ROOT="$pack/tokenizers" SPECD_TEST_WORK_DIR="$(mktemp -d)"
finish() {
  if [ -n "${OUT:-}" ]; then
    tar -C "$logs" -czf "$OUT/gpu-check-logs.tgz" .
  else
    rm -rf /tmp/gpu-check-logs && cp -r "$logs" /tmp/gpu-check-logs
  fi
  rm -rf "$pack" "$SPECD_TEST_WORK_DIR" "$logs"
}
trap finish EXIT
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || echo "gpu-check: nvidia-smi failed"
"$pack/specd" --version 2>&1 | head -5
status=0
run() {
  local name="$1" limit="$2"
  shift 2
  echo "== $name (at ${SECONDS}s)"
  if timeout "$limit" "$@" > "$logs/$name.log" 2>&1; then
    grep -E '^\[  (PASSED|SKIPPED) \]' "$logs/$name.log" | grep -v '^\[  SKIPPED \] [A-Z]' | head -3
  else
    echo "$name: exit $? (124 = over its ${limit}s)"
    status=1
    grep -E '^\[  FAILED  \]|Failure|error|Error' "$logs/$name.log" | head -40
    tail -5 "$logs/$name.log"
  fi
  grep -cE '^\[  SKIPPED \] .*/cuda[^ ]* \(' "$logs/$name.log" | sed 's/^/cuda instances skipped: /'
  grep -B1 -E '^\[  SKIPPED \] .*/cuda[^ ]* \(' "$logs/$name.log" | grep -vE '^\[|^--$' | sort | uniq -c | head -10
}
run kernels 90 "$pack/specd_kernels_test" --gtest_filter='*cuda*:*Cuda*'
run verifiers 30 "$pack/verifier_test" --gtest_filter='*Cuda*'
run model_runtime 60 "$pack/specd_model_e2e_test" --gtest_filter='*DeviceRuntime.*'
run engine 60 "$pack/spec_e2e_test" --gtest_filter='*SpecDevice*'
echo "== bench and oracle (at ${SECONDS}s)"
bash "$root/scripts/gpu-bench.sh" "$pack" "$SPECD_TEST_WORK_DIR" "$logs" $((${GPU_CHECK_SECONDS:-330} - SECONDS)) || status=1
echo "gpu-check: done at ${SECONDS}s, status $status"
exit $status
