#!/usr/bin/env bash
# Dynamic speculation grid (issue #17, docs/speculative.md "Dynamic speculation"): decode
# tokens/s of plain decoding, static k in {2, 4, 8} and the dynamic policy (k in 0..8), for the
# llama-160m fixture at three acceptance levels (--layer-std) and three batch sizes, with the
# 2-layer self-draft and the n-gram proposer. Every row's arms run interleaved
# (`specd bench --compare-k`), so its ratios are measured under the same machine load.
#   scripts/bench-dynamic-k.sh [BUILD_DIR]
# Environment (defaults = the full grid): LAYER_STDS="0.004 0.01 0.02", BATCHES=1,8,32,
# PROPOSERS="draft_model ngram", ARMS=plain,2,4,8,dynamic, PROMPT_TOKENS=64, GEN_TOKENS=64,
# REPEATS=4 (repeats per arm; on a shared machine identical work differed within a repeat by
# 6-7% (median) with whole runs, by 0.9% interleaved by steps),
# DROP_BELOW=0.75 (racing: a static arm below 0.75x the leader's best stops repeating),
# INTERLEAVE=steps (one engine per arm, the arms' runs advance one step each in turn, so the
# machine's load falls on every arm alike and the paired ratios are the ones to read; runs: one
# engine, whole runs in turn),
# MODELS_DIR=models, OUT=build/bench-dynamic-k (one JSON and one text file per cell). Each line
# gives dynamic's ratios over the whole run (of the best runs, and the median of per-repeat
# paired ratios) and over the full-batch steps (bench_decode.hpp).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${1:-build/release}
LAYER_STDS=${LAYER_STDS:-0.004 0.01 0.02}
BATCHES=${BATCHES:-1,8,32}
PROPOSERS=${PROPOSERS:-draft_model ngram}
ARMS=${ARMS:-plain,2,4,8,dynamic}
PROMPT_TOKENS=${PROMPT_TOKENS:-64}
GEN_TOKENS=${GEN_TOKENS:-64}
REPEATS=${REPEATS:-4}
DROP_BELOW=${DROP_BELOW:-0.75}
INTERLEAVE=${INTERLEAVE:-steps}
MODELS_DIR=${MODELS_DIR:-models}
OUT=${OUT:-build/bench-dynamic-k}
mkdir -p "$OUT"

max_batch=$(tr ',' '\n' <<<"$BATCHES" | sort -n | tail -1)
for std in $LAYER_STDS; do
  model="$MODELS_DIR/llama-160m-ls$std"
  [ -f "$model/config.json" ] ||
    "$BUILD/bin/specd-fixture" --preset llama-160m --embed-std 0.5 --layer-std "$std" --out "$model" >/dev/null
  for proposer in $PROPOSERS; do
    case $proposer in
      draft_model) config=configs/self-draft.yaml ;;
      ngram) config=configs/ngram.yaml ;;
      *) echo "unknown proposer '$proposer' (expected draft_model or ngram)" >&2; exit 2 ;;
    esac
    name="$OUT/$proposer-ls$std"
    echo "== $proposer, layer-std $std (batches $BATCHES; arms $ARMS)"
    "$BUILD/bin/specd" bench --config "$config" --set "model.path=$(realpath "$model")" \
      --set speculative.num_speculative_tokens=8 --set "scheduler.max_num_seqs=$max_batch" \
      --set kv_cache.memory_mib=512 --set logging.level=warn \
      --prompt-tokens "$PROMPT_TOKENS" --gen-tokens "$GEN_TOKENS" --repeats "$REPEATS" --drop-below "$DROP_BELOW" --interleave "$INTERLEAVE" --batch "$BATCHES" \
      --compare-k "$ARMS" --json >"$name.json"
    # The table: per batch, tokens/s of every arm and dynamic's ratio to the best other arm and to plain.
    /usr/bin/python3 - "$name.json" <<'EOF' | tee "$name.txt"
import json, sys
d = json.load(open(sys.argv[1]))
for row in d["rows"]:
    arms = "  ".join(f'{a["arm"]} {a["tokens_per_s"]:.1f} ({a["runs"]})' for a in row["arms"])
    ratios = ""
    for label, v in (("", row), ("full-batch ", row.get("full_batch", {}))):
        if "dynamic_vs_best_other" in v:
            ratios += f'  | {label}dynamic/best({v["best_other"]}) {v["dynamic_vs_best_other"]:.3f}'
            if "dynamic_vs_plain" in v:
                ratios += f' /plain {v["dynamic_vs_plain"]:.3f}'
    if "paired" in row:
        p = row["paired"]
        ratios += f'  | paired dynamic/best {p["dynamic_vs_best_other"]:.3f}'
        if "dynamic_vs_plain" in p:
            ratios += f' /plain {p["dynamic_vs_plain"]:.3f}'
    print(f'batch {row["batch"]:>3}: {arms}{ratios}')
EOF
  done
done
