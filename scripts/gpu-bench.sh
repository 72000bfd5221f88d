#!/usr/bin/env bash
# The bench rows of issue 32 and the transformers oracle, run by scripts/gpu-check.sh on a GPU
# machine from the unpacked .gpu bundle. Fixtures (random weights, specd-fixture) are written
# to WORK_DIR; every output goes to LOG_DIR. Each step gets what is left of SECONDS_LEFT.
#   scripts/gpu-bench.sh PACK_DIR WORK_DIR LOG_DIR SECONDS_LEFT
# k = 4 static (the rows compare plain with speculative at a fixed k). Rows: the transformers
# oracle (LlamaForCausalLM, float32) on llama-160m bf16 against specd's prompt log-probabilities
# on cpu and cuda and its greedy continuations; llama-160m plain vs speculative (2-layer
# self-draft; n-gram on a repetitive prompt) at batch 1, 8, 32;
# tinyllama-1.1b bf16 decode beside its floor and score(5)/decode(1) at batch 1 and 8, with CUDA
# graphs and without.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pack="$1" work="$2" logs="$3" budget="$4"
deadline=$((SECONDS + budget))
status=0
step() { # NAME COMMAND...: runs with what is left, output to LOG_DIR/NAME.log, a summary here
  local name="$1" left=$((deadline - SECONDS))
  shift
  if [ "$left" -lt 10 ]; then
    echo "-- $name: skipped (no time left)"
    status=1
    return 1
  fi
  echo "-- $name (at ${SECONDS}s, ${left}s left)"
  if ! timeout "$left" "$@" > "$logs/$name.log" 2>&1; then
    echo "$name failed:"
    tail -8 "$logs/$name.log"
    status=1
    return 1
  fi
}
dev="${SPECD_GPU_BENCH_DEVICE:-cuda}" # staged: the same rows on the CPU (to try this script without a GPU)
sd="$pack/specd"
fx="$pack/specd-fixture"
l160="$work/l160"
step fixture-l160 "$fx" --preset llama-160m --dtype bf16 --embed-std 0.5 --layer-std 0.004 --out "$l160"
prompt="The quick brown fox jumps over the lazy dog. Speculative decoding drafts tokens and verifies them"
for d in cpu "$dev"; do
  step "score-$d" "$sd" score --model "$l160" --set model.device=$d --prompt "$prompt" --json &&
    tail -1 "$logs/score-$d.log" > "$work/score-$d.json"
  step "generate-$d" "$sd" generate --model "$l160" --set model.device=$d --prompt "$prompt" --json \
    --temperature 0 --ignore-eos --max-tokens 32 && tail -1 "$logs/generate-$d.log" > "$work/generate-$d.json"
done
if cmp -s <(grep -o '"token_ids":\[[^]]*\]' "$work/generate-cpu.json") \
  <(grep -o '"token_ids":\[[^]]*\]' "$work/generate-$dev.json"); then
  echo "greedy llama-160m bf16: $dev equals cpu for 32 tokens"
else
  echo "greedy llama-160m bf16: $dev DIFFERS from cpu"
  status=1
fi
step oracle python3 "$root/tools/reference/hf_oracle.py" --model "$l160" --score "cpu=$work/score-cpu.json" \
  --score "$dev=$work/score-$dev.json" --generate "$dev=$work/generate-$dev.json" \
  --generate "cpu=$work/generate-cpu.json" --info cpu --out "$logs/oracle.json" && grep '^hf_oracle' "$logs/oracle.log"

config() { # PROPOSER_YAML MODEL_DIR: a cuda engine config on stdout
  cat << YAML
model: {path: $2, dtype: bf16, device: $dev}
speculative:
  num_speculative_tokens: 4
  dynamic: false
  proposer: $1
  verifier: rejection
scheduler: {max_num_seqs: 32, max_num_batched_tokens: 4096}
kv_cache: {block_size: 16}
logging: {level: warn}
YAML
}
config "{name: draft_model, layers: 2, temperature: 0}" "$l160" > "$work/self-draft.yaml"
config "{name: ngram, prompt_lookup_min: 1, prompt_lookup_max: 4}" "$l160" > "$work/ngram.yaml"
for i in $(seq 1 12); do printf 'for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }\n'; done > "$work/repetitive.txt"
step bench-l160-self-draft "$sd" bench --config "$work/self-draft.yaml" --batch 1,8,32 --prompt-tokens 128 \
  --gen-tokens 64 --repeats 2 && grep -vE '^\[' "$logs/bench-l160-self-draft.log" | tail -12
step bench-l160-ngram "$sd" bench --config "$work/ngram.yaml" --batch 1,8,32 --prompt-file "$work/repetitive.txt" \
  --gen-tokens 64 --repeats 2 && grep -vE '^\[' "$logs/bench-l160-ngram.log" | tail -12
tl="$work/tl"
step fixture-tinyllama "$fx" --preset tinyllama-1.1b --dtype bf16 --embed-std 0.5 --layer-std 0.004 --out "$tl" &&
  config "{name: draft_model, layers: 2, temperature: 0}" "$tl" > "$work/tl.yaml" &&
  step bench-tinyllama "$sd" bench --config "$work/tl.yaml" --batch 1,8 --prompt-tokens 128 --gen-tokens 32 \
    --repeats 2 --score-k 4 && grep -vE '^\[' "$logs/bench-tinyllama.log" | tail -14
# CUDA graphs off (model.cuda_graphs; on above): plain decode and scoring, launched kernel by kernel.
[ -f "$work/tl.yaml" ] && step bench-tinyllama-no-graphs "$sd" bench --config "$work/tl.yaml" \
  --set model.cuda_graphs=false --batch 1,8 --prompt-tokens 128 --gen-tokens 32 --repeats 1 --score-k 4 &&
  grep -E 'decode b=|scoring b=' "$logs/bench-tinyllama-no-graphs.log"
# Where a decode step's time goes: every kernel of a tinyllama prompt and two decode steps under
# Nsight Compute (one replay each), summed per kernel and grid (tools/reference/ncu_summary.py).
ncu_bin="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2> /dev/null | head -1)"
if [ -n "$ncu_bin" ] && [ -d "$tl" ] && [ "$dev" = cuda ] && [ "${GPU_CHECK_NCU:-1}" != 0 ]; then
  step ncu-tinyllama "$ncu_bin" --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
    --print-units base "$sd" generate \
    --model "$tl" --set model.device=cuda --prompt "$prompt" --max-tokens 2 --temperature 0 --ignore-eos &&
    python3 "$root/tools/reference/ncu_summary.py" "$logs/ncu-tinyllama.log" | tee "$logs/ncu-summary.txt" | head -30
fi
exit $status
