#!/usr/bin/env bash
# Suffix decoding table (#38): plain vs ngram vs suffix (per-request only) vs suffix (global
# cache; with DYNAMIC=true also without reporting confidence, i.e. k chosen before drafting), on the agent and edit workloads of specd-loadgen, at concurrency 1 and 8, through
# `specd serve`. Prints each run's tokens/s and the acceptance from /metrics.
#   [REQ1=12] [REQ8=32] scripts/bench-suffix.sh [MODEL_DIR] [BUILD_DIR] [MAX_TOKENS] [DYNAMIC]
# MODEL_DIR defaults to the bundled models/specd-py. DYNAMIC (false) is speculative.dynamic:
# false drafts whatever the proposer finds every step (k = 4 for ngram, 8 for suffix, whose own
# rule shortens drafts to the match).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
MODEL=${1:-models/specd-py}
BUILD=${2:-build/release}
TOKENS=${3:-64}
DYNAMIC=${4:-false}
REQ1=${REQ1:-12}
REQ8=${REQ8:-32}
CTX=$(grep -o '"max_position_embeddings": *[0-9]*' "$MODEL/config.json" | grep -o '[0-9]*$')
CHARS=$(( CTX >= 2048 ? 3000 : 1100 ))

# shellcheck source=scripts/serve-lib.sh
source scripts/serve-lib.sh

run_server() {  # $1 = label, rest = extra specd flags
  local label=$1; shift
  local log; log=$(mktemp)
  local spec=()
  [ "$label" = plain ] || spec=(--set "speculative.dynamic=$DYNAMIC")
  start_specd_server "$BUILD" "$log" --model "$MODEL" --set scheduler.max_num_seqs=16 --set kv_cache.memory_mib=512 \
    "${spec[@]}" "$@"
  local pid=$SERVER_PID url=$SERVER_URL
  local model; model=$(basename "$MODEL")
  for workload in agent edit; do
    for c in 1 8; do
      echo "== $label, $workload, concurrency $c"
      "$BUILD/bin/specd-loadgen" --url "$url" --model "$model" --concurrency $c --requests $((c == 1 ? REQ1 : REQ8)) \
        --max-tokens "$TOKENS" --workload $workload --prompt-chars "$CHARS" | grep -E '^(wall|speculation)'
    done
  done
  kill -TERM "$pid"; wait "$pid" || true
  rm -f "$log"
}

run_server plain
run_server ngram --set speculative.proposer.name=ngram --set speculative.num_speculative_tokens=4 \
  --set speculative.verifier.name=rejection
run_server suffix-request --set speculative.proposer.name=suffix --set speculative.num_speculative_tokens=8 \
  --set speculative.proposer.global_cache_tokens=0 --set speculative.verifier.name=rejection
run_server suffix-global --set speculative.proposer.name=suffix --set speculative.num_speculative_tokens=8 \
  --set speculative.verifier.name=rejection
if [ "$DYNAMIC" = true ]; then
  run_server suffix-global-no-confidence --set speculative.proposer.name=suffix \
    --set speculative.num_speculative_tokens=8 --set speculative.verifier.name=rejection \
    --set speculative.proposer.report_confidence=false
fi
