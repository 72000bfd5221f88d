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

# shellcheck source=scripts/serve-lib.sh
source scripts/serve-lib.sh
log=$(mktemp)
trap 'kill -TERM ${SERVER_PID:-0} 2>/dev/null || true; wait ${SERVER_PID:-0} 2>/dev/null || true; rm -f "$log"' EXIT
start_specd_server "$BUILD" "$log" --config configs/default.yaml
url=$SERVER_URL
echo "== specd serve --config configs/default.yaml  (listening on $url)"
echo "\$ curl $url/v1/completions -H 'Content-Type: application/json' -d '{\"model\": \"tiny\", \"prompt\": \"Once upon a time\", \"max_tokens\": 16, \"temperature\": 0}'"
curl -s "$url/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model": "tiny", "prompt": "Once upon a time", "max_tokens": 16, "temperature": 0}'
echo
