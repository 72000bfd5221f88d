#!/usr/bin/env bash
# The issue-14 figures for `specd serve` under hostile clients (docs/server.md "Limits"):
#   1. RSS while a 300 MiB chunked body is offered (server.max_body_bytes stays at its default);
#   2. GET /health latency while 300 clients each send one header byte per second;
#   3. how long a graceful shutdown takes with a slow client connected (shutdown_timeout_s: 2).
#   scripts/bench-hostile.sh [BUILD_DIR] [MODEL_DIR]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${1:-build/release}
MODEL=${2:-models/tiny}
[ -f "$MODEL/config.json" ] || "$BUILD/bin/specd-fixture" --preset tiny --out "$MODEL"

# shellcheck source=scripts/serve-lib.sh
source scripts/serve-lib.sh
log=$(mktemp)
trap 'rm -f "$log"' EXIT

start_specd_server "$BUILD" "$log" --model "$MODEL" --set server.shutdown_timeout_s=2 --set kv_cache.memory_mib=64 \
  --set model.num_threads=1
port=${SERVER_URL##*:}
sleep 1  # settle: the idle RSS is read first
"$BUILD/bin/specd-hostile-bench" --port "$port" --pid "$SERVER_PID" --chunked-mb 300
"$BUILD/bin/specd-hostile-bench" --port "$port" --pid "$SERVER_PID" --slow-clients 300 --seconds 15
"$BUILD/bin/specd-hostile-bench" --port "$port" --pid "$SERVER_PID" --slow-shutdown
wait "$SERVER_PID" || true
