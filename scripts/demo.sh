#!/usr/bin/env bash
# The README's main job: on the bundled default config (the generated `tiny` fixture model),
# generate once from the CLI, then start the OpenAI-compatible server, send one request with
# curl, and stop the server.
set -euo pipefail
BUILD=${1:-build/release}
cd "$(dirname "${BASH_SOURCE[0]}")/.."

"$BUILD/bin/specd-fixture" --preset tiny --seed 1 --out models/tiny >/dev/null
"$BUILD/bin/specd" --version
"$BUILD/bin/specd" validate --config configs/default.yaml
echo
echo "== specd generate (plain decoding)"
"$BUILD/bin/specd" generate --config configs/default.yaml --prompt "Once upon a time" --max-tokens 24 --temperature 0
echo
echo "== specd generate (speculative: 1-layer self-draft, rejection sampling)"
"$BUILD/bin/specd" generate --config configs/default.yaml --prompt "Once upon a time" --max-tokens 24 \
  --temperature 0 --set speculative.proposer.name=draft_model --set speculative.proposer.layers=1
echo

log=$(mktemp)
"$BUILD/bin/specd" serve --config configs/default.yaml --port 0 2>"$log" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -f "$log"' EXIT
url=
for _ in $(seq 1 150); do
  if addr=$(grep -o 'listening on http://127\.0\.0\.1:[0-9]*' "$log" | head -1) && [ -n "$addr" ]; then
    url=${addr#listening on }
    curl -sf "$url/health" >/dev/null && break
  fi
  kill -0 $pid 2>/dev/null || { cat "$log"; exit 1; }
  sleep 0.2
done
[ -n "$url" ] || { echo "server did not start"; cat "$log"; exit 1; }
echo "== specd serve --config configs/default.yaml  (listening on $url)"
echo "\$ curl $url/v1/completions -H 'Content-Type: application/json' -d '{\"model\": \"tiny\", \"prompt\": \"Once upon a time\", \"max_tokens\": 16, \"temperature\": 0}'"
curl -s "$url/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model": "tiny", "prompt": "Once upon a time", "max_tokens": 16, "temperature": 0}'
echo
