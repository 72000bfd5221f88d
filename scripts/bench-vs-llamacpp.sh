#!/usr/bin/env bash
# Side by side with llama.cpp on the same GGUF files (docs/performance.md "Measured"): for each
# file, llama-bench (prefill-128, decode-64), specd bench plain, llama-speculative-simple and
# specd bench with the same 2-layer draft (k = 4, greedy). The engines take turns, so a busy
# host slows both alike. llama.cpp is built outside the project.
#
#   LLAMA_BIN=/path/to/llama.cpp/build/bin scripts/bench-vs-llamacpp.sh \
#       target-f16.gguf:draft-f16.gguf target-q4km.gguf:draft-q4km.gguf ...
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
B="${LLAMA_BIN:?set LLAMA_BIN to the build/bin folder of llama.cpp}"
S="${SPECD:-$here/build/release/bin/specd}"
P="${PROMPT:-def fibonacci(n):}"
export LD_LIBRARY_PATH="$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[ $# -gt 0 ] || { echo "usage: LLAMA_BIN=... $0 target.gguf:draft.gguf ..." >&2; exit 2; }
for pair in "$@"; do
  target="${pair%%:*}" draft="${pair#*:}"
  echo "=== $target (draft $draft)"
  "$B/llama-bench" -m "$target" -t 2 -p 128 -n 64 -r 3 -o md 2>/dev/null | grep -E "pp128|tg64"
  "$S" bench --model "$target" --batch 1 --prompt-tokens 128 --gen-tokens 64 --repeats 3 2>&1 |
    grep -E "kernels on|prefill|decode b=1"
  "$B/llama-speculative-simple" -m "$target" -md "$draft" --spec-type draft-simple --spec-draft-n-max 4 --temp 0 \
    -t 2 -td 2 -p "$P" -n 96 -c 512 2>&1 | grep -E "decoded|accept  "
  "$S" bench --model "$target" --batch 1 --prompt-tokens 128 --gen-tokens 64 --repeats 3 --prompt "$P" \
    --set speculative.num_speculative_tokens=4 --set speculative.proposer.name=draft_model \
    --set speculative.proposer.model="$draft" --set speculative.dynamic=false --set speculative.verifier=greedy 2>&1 |
    grep -E "spec   b=1|acceptance 0|scoring b=1|decode b=1"
done
