#!/usr/bin/env bash
# Builds the libFuzzer targets (cmake --preset fuzz: clang, ASan + UBSan, in build/fuzz) and runs
# each for a bounded time on its seed corpus (tests/fuzz/corpus/<target>; what a run discovers is
# kept in build/fuzz/corpus/<target>, crashes in build/fuzz/artifacts/).
#   scripts/fuzz.sh [--seconds N] [--jobs J] [TARGET...]     (targets: request_json
#                   safetensors_header tokenizer_json yaml_config gguf chat_template ab_log; default all)
# Exit status: 0 when no target found anything, 77 when clang's libFuzzer is missing (CTest
# reports the test as skipped), else non-zero with the fuzzer's report. CTest's `fuzz_smoke`
# runs 15 s per target; a longer campaign is e.g. `scripts/fuzz.sh --seconds 3600 request_json`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds=15
jobs=2
targets=()
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(request_json safetensors_header tokenizer_json yaml_config gguf chat_template ab_log)

probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' > "$probe/p.cpp"
if ! command -v clang++ >/dev/null 2>&1 || ! clang++ -fsanitize=fuzzer "$probe/p.cpp" -o "$probe/p" 2>/dev/null; then
  echo "fuzz: clang++ with libFuzzer is not installed (Debian: clang libclang-rt-14-dev); skipped"
  exit 77
fi

cmake --preset fuzz >/dev/null
cmake --build build/fuzz --target fuzz -j "$jobs"
mkdir -p build/fuzz/artifacts
for t in "${targets[@]}"; do
  mkdir -p "build/fuzz/corpus/$t"
  echo "== fuzz_$t: ${seconds} s"
  log="build/fuzz/artifacts/$t.log"
  status=0
  # Chat templates are bounded in work, memory and time (template/budget.hpp): one input past
  # 2 s or 512 MB is a finding there, not only a crash.
  limits="-timeout=10 -rss_limit_mb=2048"
  [ "$t" = chat_template ] && limits="-timeout=2 -rss_limit_mb=512"
  # shellcheck disable=SC2086
  build/fuzz/bin/fuzz_"$t" -max_total_time="$seconds" $limits -print_final_stats=1 \
    -artifact_prefix="build/fuzz/artifacts/$t-" "build/fuzz/corpus/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1 || status=$?
  grep -E '^stat::(number_of_executed_units|peak_rss_mb)|^#[0-9]+ +DONE' "$log" || true
  if [ "$status" -ne 0 ]; then
    grep -v '^#[0-9]' "$log" | tail -60
    echo "fuzz_$t found a problem (exit $status); reproduce with: build/fuzz/bin/fuzz_$t build/fuzz/artifacts/$t-*"
    exit "$status"
  fi
done
echo "fuzz: no findings in ${#targets[@]} targets x ${seconds} s"
