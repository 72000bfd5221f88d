#!/usr/bin/env bash
# The per-level grid of docs/performance.md: `specd bench` at every CPU kernel level this machine
# runs (SPECD_CPU_ISA forces each; levels the CPU lacks are skipped), for each dtype, on one
# model. Prints a Markdown table: prefill-128 tokens/s, decode tokens/s at batch 1, the ratio of
# decode to the first level's, and score(5)/decode(1). Levels run in turn per dtype after one
# unreported warm-up run, so a busy host slows neighbouring rows alike; compare within a dtype.
#
#   scripts/bench-isa-grid.sh MODEL [DTYPES] [LEVELS]
#   scripts/bench-isa-grid.sh /tmp/tinyllama q8_0,q4_0,q4_k bf16,avx2,avx512
# MODEL: a Hugging Face directory or a GGUF file; DTYPES: model.dtype values (default q8_0,q4_0);
# LEVELS: default every x86 and ARM level, the CPU's best first. SPECD=path/to/specd overrides the binary.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
S="${SPECD:-$here/build/release/bin/specd}"
model="${1:?usage: $0 MODEL [DTYPES] [LEVELS]}"
IFS=, read -r -a dtypes <<<"${2:-q8_0,q4_0}"
IFS=, read -r -a levels <<<"${3:-avx512_bf16,avx512_vbmi,avx512_vnni,avx512,avx2,neon_dotprod,neon,scalar}"
gen="${GEN_TOKENS:-32}"

runs() {  # runs LEVEL: true when the CPU runs this level
  SPECD_CPU_ISA="$1" "$S" --log-level error generate --model "$here/models/specd-py" --prompt x --max-tokens 1 \
    --temperature 0 >/dev/null 2>&1
}

echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) threads, $(date -u +%Y-%m-%d); $model"
echo
echo "| dtype | level | prefill-128 tok/s | decode b=1 tok/s | decode vs the first level | score(5)/decode(1) |"
echo "| --- | --- | --- | --- | --- | --- |"
bench() {  # bench LEVEL DTYPE: specd bench's JSON
  SPECD_CPU_ISA="$1" "$S" --log-level warn bench --model "$model" --dtype "$2" --batch 1 --prompt-tokens 128 \
    --gen-tokens "$gen" --repeats 2 --json
}
for dtype in "${dtypes[@]}"; do
  best=""
  bench "${levels[0]}" "$dtype" >/dev/null  # warm-up: the first run of a group measured 10-20% low
  for level in "${levels[@]}"; do
    runs "$level" || continue
    json=$(bench "$level" "$dtype")
    read -r prefill decode ratio < <(/usr/bin/python3 -c '
import json, sys
j = json.loads(sys.argv[1])
print(j["prefill_tokens_per_s"], j["decode"][0]["tokens_per_s"], j["scoring"]["rows"][0]["ratio"])' "$json")
    [ -n "$best" ] || best=$decode
    /usr/bin/python3 -c '
import sys
d, l, p, t, b, r = sys.argv[1:]
print(f"| {d} | {l} | {float(p):.1f} | {float(t):.2f} | {float(t) / float(b):.2f}x | {float(r):.2f}x |")' \
      "$dtype" "$level" "$prefill" "$decode" "$best" "$ratio"
  done
done
