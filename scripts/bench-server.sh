#!/usr/bin/env bash
# Server load table (issue #7): requests/s, TTFT and TPOT percentiles at concurrency 1, 8 and
# 32, with speculation off and on (self-draft of the target's first 2 layers, k = 4).
#   scripts/bench-server.sh [MODEL_DIR] [BUILD_DIR] [MAX_TOKENS]
# MODEL_DIR defaults to models/llama-160m, generated with the ARCHITECTURE.md dial
# (embeddings 0.5, layers 0.004) so that the self-draft agrees with the target often.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
MODEL=${1:-models/llama-160m}
BUILD=${2:-build/release}
TOKENS=${3:-32}
[ -f "$MODEL/config.json" ] || "$BUILD/bin/specd-fixture" --preset llama-160m --embed-std 0.5 --layer-std 0.004 --out "$MODEL"

# shellcheck source=scripts/serve-lib.sh
source scripts/serve-lib.sh

run_server() {  # $1 = label, rest = extra specd flags
  local label=$1; shift
  local log; log=$(mktemp)
  start_specd_server "$BUILD" "$log" --model "$MODEL" --set scheduler.max_num_seqs=32 --set model.max_model_len=512 \
    --set kv_cache.memory_mib=512 "$@"
  local pid=$SERVER_PID url=$SERVER_URL
  local model; model=$(basename "$MODEL")
  for c in 1 8 32; do
    echo "== speculation $label, concurrency $c"
    "$BUILD/bin/specd-loadgen" --url "$url" --model "$model" --concurrency $c --requests $((c < 4 ? 8 : 2 * c)) \
      --max-tokens "$TOKENS" --stream
  done
  curl -s "$url/metrics" | grep -E '^specd_spec_(acceptance_rate|mean_acceptance_length)' || true
  kill -TERM $pid; wait $pid || true
  rm -f "$log"
}

run_server off
run_server on --set speculative.proposer.name=draft_model --set speculative.proposer.layers=2 \
  --set speculative.num_speculative_tokens=4 --set speculative.verifier.name=rejection
