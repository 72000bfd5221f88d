#!/usr/bin/env bash
# The README's main job, on the bundled default models (models/README.md): a 4-layer Llama
# trained on Python code (models/specd-py, with two MTP heads) and its 1-layer draft
# (models/specd-py-draft). Completes a code prompt with plain decoding and with the draft-model,
# MTP and n-gram proposers (greedy, so every completion must be the same text), measures each
# proposer's speedup and acceptance with `specd bench`, then starts the OpenAI-compatible
# server, sends one request with curl, and stops the server.
set -euo pipefail
BUILD=${1:-build/release}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
specd="$BUILD/bin/specd"
prompt_file=models/demo-prompt.py
prompt="$(cat "$prompt_file"; printf x)"  # keep the trailing newline
prompt=${prompt%x}

"$specd" --version
for c in default draft-model mtp ngram; do "$specd" validate --config "configs/$c.yaml" >/dev/null; done

echo
echo "== the prompt: $prompt_file (last lines)"
tail -n 4 "$prompt_file"
complete() {  # complete CONFIG TITLE: prints the completion, keeps it in $completion
  echo
  echo "== $2  (specd generate --config configs/$1.yaml --temperature 0 --max-tokens 64)"
  completion=$("$specd" --log-level warn generate --config "configs/$1.yaml" --prompt "$prompt" --max-tokens 64 \
    --temperature 0)
  printf '%s\n' "$completion"
}
complete default "plain decoding"
plain=$completion
for c in draft-model mtp ngram; do
  complete "$c" "speculative: $c"
  if [ "$completion" = "$plain" ]; then echo "(same text as plain decoding)"; else echo "(DIFFERS from plain decoding)"; exit 1; fi
done

echo
echo "== speed: specd bench, 128 greedy tokens after the same prompt, plain and speculative in one run each"
bench_dir=$(mktemp -d)
trap 'rm -rf "$bench_dir"' EXIT
for c in draft-model mtp ngram; do
  "$specd" --log-level warn bench --config "configs/$c.yaml" --prompt-file "$prompt_file" --gen-tokens 128 \
    --batch 1,8 --repeats 2 --json >"$bench_dir/$c.json"
done
/usr/bin/python3 - "$bench_dir"/{draft-model,mtp,ngram}.json <<'EOF'
import json, sys
print(f"{'proposer':<12} {'k':>2} {'batch':>5} {'plain tok/s':>12} {'spec tok/s':>11} {'speedup':>8} {'acceptance':>11} {'mean len':>9}")
for path in sys.argv[1:]:
    s = json.load(open(path))["speculative"]
    for r in s["rows"]:
        print(f"{s['proposer']:<12} {s['k']:>2} {r['batch']:>5} {r['plain']['tokens_per_s']:>12.1f} "
              f"{r['speculative']['tokens_per_s']:>11.1f} {r['speedup']:>7.2f}x {r['acceptance_rate']:>11.3f} "
              f"{r['mean_acceptance_length']:>9.2f}")
EOF
echo "(acceptance = accepted / drafted tokens; mean len = tokens per target forward = 1 + accepted / drafts)"

# shellcheck source=scripts/serve-lib.sh
source scripts/serve-lib.sh
log=$(mktemp)
trap 'kill -TERM ${SERVER_PID:-0} 2>/dev/null || true; wait ${SERVER_PID:-0} 2>/dev/null || true; rm -rf "$log" "$bench_dir"' EXIT
start_specd_server "$BUILD" "$log" --config configs/default.yaml
url=$SERVER_URL
body='{"model": "specd-py", "prompt": "def fibonacci(n):\n", "max_tokens": 48, "temperature": 0}'
echo
echo "== specd serve --config configs/default.yaml  (listening on $url)"
echo "\$ curl $url/v1/completions -H 'Content-Type: application/json' -d '$body'"
curl -s "$url/v1/completions" -H 'Content-Type: application/json' -d "$body"
echo
