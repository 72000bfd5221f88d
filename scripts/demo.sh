#!/usr/bin/env bash
# The README's main job, in three parts.
#  1. The bundled default models (models/README.md): a 4-layer Llama trained on Python code
#     (models/specd-py, with two MTP heads) and its 1-layer draft (models/specd-py-draft).
#     Completes a code prompt with plain decoding and with the default config (n-gram, dynamic k)
#     and the draft-model and MTP proposers (greedy, so every completion must be the same text),
#     and measures each proposer's speedup and acceptance with `specd bench`.
#  2. A memory-bound target, where speculation is meant to pay: the llama-160m benchmark fixture
#     (random weights; with the bundled tokenizer, 4096 tokens: 239 MB in bf16; written by
#     specd-fixture into the build folder) with a self-draft of its first 2 layers. Same text
#     check and `specd bench`.
#  3. `specd serve --config configs/default.yaml` answers one curl request; its usage and
#     /metrics show the speculation it did.
set -euo pipefail
BUILD=${1:-build/release}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
specd="$BUILD/bin/specd"
prompt_file=models/demo-prompt.py
prompt="$(cat "$prompt_file"; printf x)"  # keep the trailing newline
prompt=${prompt%x}
bench_dir=$(mktemp -d)
trap 'rm -rf "$bench_dir"' EXIT
# The tables this run prints, for the model card (tools/train/model_card.py reads them).
mkdir -p "$BUILD/demo"
tables="$BUILD/demo/tables.txt"
printf '%s, %s\n' "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')" "$(date -u +%Y-%m-%d)" >"$tables"

"$specd" --version
for c in default draft-model mtp ngram self-draft; do "$specd" validate --config "configs/$c.yaml" >/dev/null; done

echo
echo "== the prompt: $prompt_file (last lines)"
tail -n 4 "$prompt_file"
complete() {  # complete TITLE ARGS...: prints the completion, keeps it in $completion
  local title=$1
  shift
  echo
  echo "== $title  (specd generate $* --temperature 0 --max-tokens 64)"
  completion=$("$specd" --log-level warn generate "$@" --prompt "$prompt" --max-tokens 64 --temperature 0)
  printf '%s\n' "$completion"
}
same_as_plain() {
  if [ "$completion" = "$plain" ]; then echo "(same text as plain decoding)"; else echo "(DIFFERS from plain decoding)"; exit 1; fi
}
table() {  # table MODEL=JSON...: one row per proposer and batch from `specd bench --compare-k plain,dynamic --json`, also kept in $tables
  /usr/bin/python3 - "$@" <<'PY' | tee -a "$tables"
import json, sys
print(f"{'model':<11} {'proposer':<12} {'k':>2} {'batch':>5} {'plain tok/s':>12} {'spec tok/s':>11} {'speedup':>8} {'acceptance':>11} {'mean len':>9}")
for path in sys.argv[1:]:
    model, path = path.split("=", 1)
    j = json.load(open(path))
    for r in j["rows"]:
        arms = {a["arm"]: a for a in r["arms"]}
        plain, spec = arms["plain"], arms["dynamic"]
        d = spec["dynamic"]
        drafted = d["drafts"] > 0  # else dynamic k drafted nothing: no acceptance to show
        acc = f"{spec['acceptance_rate']:>11.3f}" if drafted else f"{'-':>11}"
        mlen = f"{1 + d['accepted'] / d['drafts']:>9.2f}" if drafted else f"{'-':>9}"
        print(f"{model:<11} {j['proposer']:<12} {j['k_max']:>2} {r['batch']:>5} {plain['tokens_per_s']:>12.1f} "
              f"{spec['tokens_per_s']:>11.1f} {r['dynamic_vs_plain']:>7.2f}x {acc} {mlen}")
PY
  echo "(dynamic k; plain and speculative each on an engine of its own, advancing one step each in turn, best run"
  echo " of each; acceptance = accepted / drafted tokens; mean len = tokens per target forward = 1 + accepted / drafts;"
  echo " - : dynamic k drafted nothing in the reported run)"
}
speed() {  # speed OUT ARGS...: `specd bench`, plain against dynamic speculation, interleaved by engine step
  local out=$1
  shift
  "$specd" --log-level warn bench "$@" --compare-k plain,dynamic --interleave steps --drop-below 0 --json >"$out"
}

echo
echo "######## 1. the bundled models: a 2.6 M-parameter target that fits in the CPU cache"
complete "plain decoding" --config configs/default.yaml --no-speculation
plain=$completion
for c in default draft-model mtp; do
  complete "speculative: configs/$c.yaml" --config "configs/$c.yaml"
  same_as_plain
done
echo
# A 128-token run takes 10-60 ms here, and a shared machine's speed moves by tens of percent
# within seconds: plain and speculative decoding each run on an engine of their own and advance
# one step each in turn, so a slow moment falls on both alike; the best of 15 runs of each.
echo "== speed: specd bench, 128 greedy tokens after the same prompt, plain and speculative interleaved by step, best of 15 each"
for c in default draft-model mtp; do
  speed "$bench_dir/$c.json" --config "configs/$c.yaml" --prompt-file "$prompt_file" --gen-tokens 128 --batch 1,8 --repeats 15
done
table specd-py="$bench_dir/default.json" specd-py="$bench_dir/draft-model.json" specd-py="$bench_dir/mtp.json"

echo
echo "######## 2. a memory-bound target: llama-160m (12 layers, 239 MB of bf16 weights, random) and a"
echo "######## self-draft made of its own first 2 layers (configs/self-draft.yaml)"
fixture="$BUILD/demo/llama-160m"
if [ ! -f "$fixture/config.json" ]; then
  echo "writing the fixture to $fixture (specd-fixture --preset llama-160m, about 5 s)"
fi
"$BUILD/bin/specd-fixture" --preset llama-160m --embed-std 0.5 --layer-std 0.004 --dtype bf16 \
  --tokenizer-dir models/specd-py --vocab-size 4096 --out "$fixture" >/dev/null
big=(--config configs/self-draft.yaml --set "model.path=$PWD/$fixture")
complete "plain decoding" "${big[@]}" --no-speculation
plain=$completion
complete "speculative: 2-layer self-draft" "${big[@]}"
same_as_plain
echo
echo "== speed: specd bench, 64 greedy tokens after the same prompt, interleaved by step, best of 2 each"
speed "$bench_dir/llama-160m.json" "${big[@]}" --prompt-file "$prompt_file" --gen-tokens 64 --batch 1,8 --repeats 2
table llama-160m="$bench_dir/llama-160m.json"
cat <<'TXT'

When does speculation pay? When the target is memory-bound (its weights do not fit in the CPU
cache, so one decode step costs about as much as scoring k+1 drafted positions: here llama-160m
at batch 1) and the proposer is cheap and usually right. The bundled model sits in the cache:
scoring 5 positions costs about 2.5 decode steps there, and a batch of 8 is compute-bound on 2
cores as well, so speculation has little to win. Dynamic k (the default) measures both sides
every step and drafts only where it expects a gain, so it stays close to plain decoding where
speculation cannot win. llama-160m at batch 8 is compute-bound on 2 cores too (a step of 8 rows
costs about 3 of one), and drafting pays there at this draft's acceptance (0.93); the draft
misses the first token after this prompt in all 8 identical rows at once, which the policy
counts as one observation (a step's rows are not independent evidence) and drafts again.
TXT

# shellcheck source=scripts/serve-lib.sh
source scripts/serve-lib.sh
log=$(mktemp)
trap 'kill -TERM ${SERVER_PID:-0} 2>/dev/null || true; wait ${SERVER_PID:-0} 2>/dev/null || true; rm -rf "$log" "$bench_dir"' EXIT
echo
echo "######## 3. the server on the default config"
start_specd_server "$BUILD" "$log" --config configs/default.yaml
url=$SERVER_URL
body='{"model": "specd-py", "prompt": "def fibonacci(n):\n", "max_tokens": 48, "temperature": 0}'
echo
echo "== specd serve --config configs/default.yaml  (listening on $url)"
echo "\$ curl $url/v1/completions -H 'Content-Type: application/json' -d '$body'"
response=$(curl -s "$url/v1/completions" -H 'Content-Type: application/json' -d "$body")
printf '%s\n' "$response"
/usr/bin/python3 -c '
import json, sys
u = json.loads(sys.argv[1])["usage"]
s = u.get("speculative")
if s is None:
    print("(usage has no speculative object: the server did not speculate)")
else:
    print("usage.speculative:", json.dumps(s))
' "$response"
echo "\$ curl -s $url/metrics | grep -E '^specd_spec_(draft|accepted)_tokens_total|^specd_spec_acceptance_rate'"
curl -s "$url/metrics" | grep -E '^specd_spec_(draft|accepted)_tokens_total|^specd_spec_acceptance_rate' || true
