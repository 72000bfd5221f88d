# Sourced by scripts/demo.sh and scripts/bench-server.sh.
# start_specd_server BUILD_DIR LOG_FILE [specd serve flags...]
# Starts `specd serve --port 0` in the background, waits until /health answers, and sets
# SERVER_PID and SERVER_URL. Returns non-zero (after printing the log) if it does not start.
start_specd_server() {
  local build=$1 log=$2
  shift 2
  "$build/bin/specd" serve --port 0 "$@" 2>"$log" &
  SERVER_PID=$!
  SERVER_URL=
  local addr
  for _ in $(seq 1 300); do
    if addr=$(grep -o 'listening on http://127\.0\.0\.1:[0-9]*' "$log" | head -1) && [ -n "$addr" ]; then
      SERVER_URL=${addr#listening on }
      curl -sf "$SERVER_URL/health" >/dev/null && return 0
    fi
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.2
  done
  echo "specd serve did not start:" >&2
  cat "$log" >&2
  return 1
}
