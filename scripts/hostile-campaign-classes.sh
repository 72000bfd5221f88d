# The input classes of scripts/hostile-campaign.sh (sourced by it; uses its helpers: gen, cli_run,
# judge_cli, start_server, http_req, judge_http, fail, tried, note, anomaly). One run_<class>
# function per class.

# ---- 1. chat templates ---------------------------------------------------------------------
# model_with_template NAME FILE HOW: a model directory (hard links to the fixture) whose
# tokenizer_config.json carries the template (a string, or transformers' list of named ones).
model_with_template() {
  local dir=$WORK/models/$1 f
  mkdir -p "$dir"
  for f in config.json generation_config.json model.safetensors tokenizer.json; do
    ln "$MODEL/$f" "$dir/$f" 2>/dev/null || cp "$MODEL/$f" "$dir/$f"
  done
  "$PY" - "$MODEL/tokenizer_config.json" "$2" "$3" "$dir/tokenizer_config.json" <<'PY'
import json, sys
cfg = json.load(open(sys.argv[1]))
src = open(sys.argv[2]).read()
if sys.argv[3] == "tokenizer_config":
    cfg["chat_template"] = src
elif sys.argv[3] == "tokenizer_config_list":
    cfg["chat_template"] = json.loads(src)
json.dump(cfg, open(sys.argv[4], "w"))
PY
  echo "$dir"
}

run_templates() {
  CUR="chat templates"
  local C="chat templates" name file how reqs mdir rc i peak body n=0 first_ok refused=0
  gen templates
  while IFS=$'\t' read -r name file how reqs; do
    wanted "$name" || continue
    tried "$C"
    mdir=$(model_with_template "$name" "$file" "$how")
    local extra=()
    [ "$how" = option ] && extra=(--set "server.chat_template=$file")
    [ "$how" = tokenizer_config_list ] && extra=(--set server.tool_call_parser=hermes)
    start_server "$WORK/tpl.log" --model "$mdir" "${SERVE_ARGS[@]}" "${extra[@]}"
    rc=$?
    vlog "$name: serve start-up: $(start_outcome "$rc" "$WORK/tpl.log")"
    if [ "$rc" != 0 ]; then
      if [ "$rc" = 1 ] && [ -n "$(signal_of "$SRV_RC")" ]; then
        fail "$C" crash "$name" "server start-up: killed by SIG$(signal_of "$SRV_RC")"
      elif [ "$rc" = 2 ]; then
        fail "$C" hang "$name" "server start-up: $(start_outcome 2 "$WORK/tpl.log")"
        stop_server 1
      else
        refused=$((refused + 1))  # a template that does not compile is refused by name: expected
      fi
      continue
    fi
    i=0
    first_ok=1
    while IFS= read -r body; do
      i=$((i + 1))
      n=$((n + 1))
      printf '%s' "$body" | "$PY" -c 'import json,sys; d=json.load(sys.stdin); d["model"]=sys.argv[1]; print(json.dumps(d))' "$name" >"$WORK/.body"
      http_req "$SRV_URL/v1/chat/completions" POST "$WORK/.body" cl "$WORK/.resp"
      judge_http "$C" "$name" "request $i" 200,4xx
      [ "$H_MS" -gt 2000 ] && first_ok=0
      srv_alive || break
    done <"$reqs"
    peak=$(srv_peak_kb)
    [ "$peak" -gt $((SRV_IDLE_KB + RSS_OVER_KB)) ] && first_ok=0
    # the same request from 2 clients at once: each render has its own budget
    if srv_alive && [ "$first_ok" = 1 ]; then
      head -1 "$reqs" | "$PY" -c 'import json,sys; d=json.load(sys.stdin); d["model"]=sys.argv[1]; print(json.dumps(d))' "$name" >"$WORK/.body"
      local pa=() k
      for k in 1 2; do
        curl -s -o "$WORK/.resp$k" -w '%{http_code} %{time_total}\n' -m 30 -H 'Content-Type: application/json' \
          --data-binary "@$WORK/.body" "$SRV_URL/v1/chat/completions" >"$WORK/.conc$k" &
        pa+=("$!")
      done
      wait "${pa[@]}"
      n=$((n + 2))
      for k in 1 2; do
        read -r H_CODE H_TIME <"$WORK/.conc$k"
        H_MS=$(awk -v t="${H_TIME:-0}" 'BEGIN {printf "%d", t * 1000}')
        H_BYTES=0
        H_CURL=0
        cp "$WORK/.resp$k" "$WORK/.resp" 2>/dev/null
        judge_http "$C" "$name" "concurrent request $k" 200,4xx
      done
      peak=$(srv_peak_kb)
    fi
    if [ "$peak" -gt $((SRV_IDLE_KB + RSS_OVER_KB)) ] && [ "$(cat "$SRV_GUARD")" != rss ]; then
      fail "$C" rss "$name" "server peak RSS $((peak / 1024)) MB (idle $((SRV_IDLE_KB / 1024)) MB)"
    fi
    if srv_alive; then
      # a render still running would hold the exit (the SIGTERM row measures that): 1 s, then KILL
      if [ "$first_ok" = 1 ]; then stop_server; else stop_server 1; fi
      local sig
      sig=$(signal_of "$STOP_RC")
      [ -n "$sig" ] && [ "$sig" != KILL ] && fail "$C" crash "$name" "server exit after SIGTERM: SIG$sig"
    fi
  done <"$WORK/templates/manifest.tsv"
  note "$C" "$n requests; served from tokenizer_config.json or server.chat_template; $refused refused at start-up with an error naming the template"

  # SIGTERM while a render runs: exit within shutdown_timeout_s + 1 s
  local S="chat templates: SIGTERM during a render" ms limit_ms=$(((SHUTDOWN_S + 1) * 1000)) worst=0 cp
  CUR=$S
  while IFS=$'\t' read -r name file ms; do
    wanted "$name" || continue
    tried "$S"
    start_server "$WORK/sig.log" --model "$MODEL" "${SERVE_ARGS[@]}" --set "server.chat_template=$file" \
      --set "server.template_timeout_ms=$ms" || { anomaly "$S" "$name" "server did not start"; stop_server 1; continue; }
    printf '{"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}' >"$WORK/.body"
    curl -s -o "$WORK/.resp" -w '%{http_code}' -m 30 -H 'Content-Type: application/json' \
      --data-binary "@$WORK/.body" "$SRV_URL/v1/chat/completions" >"$WORK/.sigcode" &
    cp=$!
    sleep 0.5
    stop_server 30
    wait "$cp"
    [ "$STOP_MS" -gt "$worst" ] && worst=$STOP_MS
    local sig
    sig=$(signal_of "$STOP_RC")
    if [ -n "$sig" ] && { [ "$sig" != KILL ] || [ "$STOP_MS" -lt 30000 ]; }; then
      fail "$S" crash "$name" "exit by SIG$sig after SIGTERM"
    fi
    [ "$STOP_MS" -gt "$limit_ms" ] && fail "$S" hang "$name (template_timeout_ms $ms)" \
      "exited $(secs "$STOP_MS") s after SIGTERM (limit $((SHUTDOWN_S + 1)) s; the request got HTTP $(cat "$WORK/.sigcode"))"
    case $(cat "$WORK/.sigcode") in 500) fail "$S" 5xx "$name" "the request got HTTP 500" ;; esac
  done <"$WORK/templates/sigterm.tsv"
  note "$S" "shutdown_timeout_s $SHUTDOWN_S; slowest exit $(secs "$worst") s"
}

# ---- 2. GGUF vocabularies ------------------------------------------------------------------
run_gguf() {
  CUR="GGUF vocabularies"
  local C="GGUF vocabularies" name file base_i=0 base_g=0 base_s=0 rc
  local prompt
  prompt="hello world $(printf 'z%.0s' $(seq 300)) <zzz"
  gen gguf
  while IFS=$'\t' read -r name file; do
    wanted "$name" || continue
    local mb
    mb=$(($(stat -c %s "$file") / 1048576))
    cli_run "$LIMIT_S" "$WORK/.out" "$WORK/.err" "$SPECD" inspect "$file"
    local ri=$R_KB
    if [ "$name" != benign_baseline ]; then tried "$C"; judge_cli "$C" "$name" "inspect ($mb MB file)" "$base_i"; fi
    cli_run "$LIMIT_S" "$WORK/.out" "$WORK/.err" "$SPECD" generate --model "$file" --prompt "$prompt" \
      --max-tokens 2 --temperature 0 --set model.num_threads=1 --set kv_cache.memory_mib=16
    local rg=$R_KB
    if [ "$name" = benign_baseline ] && [ "$R_RC" != 0 ]; then
      echo "hostile-campaign: the benign GGUF does not generate: $(head -c 300 "$WORK/.err")" >&2
    fi
    [ "$name" != benign_baseline ] && judge_cli "$C" "$name" "generate ($mb MB file)" "$base_g"
    start_server "$WORK/gguf.log" --model "$file" "${SERVE_ARGS[@]}"
    rc=$?
    vlog "$name: serve start-up: $(start_outcome "$rc" "$WORK/gguf.log")"
    local rs=0
    if [ "$rc" = 0 ]; then
      rs=$(srv_peak_kb)
      stop_server
    elif [ "$rc" = 2 ]; then
      rs=$(srv_peak_kb)
      stop_server 1
    fi
    if [ "$name" = benign_baseline ]; then
      base_i=$ri base_g=$rg base_s=$rs
      [ "$rc" = 0 ] || echo "hostile-campaign: the benign GGUF does not serve" >&2
      continue
    fi
    if [ "$rc" = 1 ] && [ -n "$(signal_of "$SRV_RC")" ]; then
      fail "$C" crash "$name" "serve start-up: killed by SIG$(signal_of "$SRV_RC")"
    fi
    [ "$rc" = 2 ] && fail "$C" hang "$name" "serve start-up: $(start_outcome 2 "$WORK/gguf.log")"
    [ "$rc" = 0 ] && [ "$SRV_READY_MS" -gt $((HANG_S * 1000)) ] &&
      fail "$C" hang "$name" "serve start-up: ready after $(secs "$SRV_READY_MS") s"
    [ "$rc" != 1 ] && [ "$rs" -gt $((base_s + RSS_OVER_KB)) ] &&
      fail "$C" rss "$name" "serve start-up ($mb MB file): peak RSS $((rs / 1024)) MB (benign file $((base_s / 1024)) MB)"
  done <"$WORK/gguf/manifest.tsv"
  note "$C" "each file: inspect, generate, serve start-up; idle = the same commands on a benign file"
}

# ---- 3. A/B logs ---------------------------------------------------------------------------
run_ablog() {
  CUR="A/B logs"
  local C="A/B logs" name path kind base=0 wp
  gen ablog
  while IFS=$'\t' read -r name path kind; do
    wanted "$name" || continue
    wp=
    case $kind in
      fifo) mkfifo "$path" ;;
      fifo_writer)
        mkfifo "$path"
        # shellcheck disable=SC2016  # $1 is the inner shell's
        timeout 30 sh -c 'cat /dev/zero >"$1"' sh "$path" 2>/dev/null &
        wp=$!
        PIDS+=("$wp")
        ;;
      dir) mkdir -p "$path" ;;
      symlink_zero) ln -s /dev/zero "$path" ;;
      symlink_loop) ln -s "$(basename "$path")" "$path" ;;
    esac
    cli_run "$LIMIT_S" "$WORK/.out" "$WORK/.err" "$SPECD" ab report "$path"
    if [ -n "$wp" ]; then kill "$wp" 2>/dev/null; wait "$wp" 2>/dev/null; fi
    if [ "$name" = valid_3_records ]; then
      base=$R_KB
      [ "$R_RC" = 0 ] || echo "hostile-campaign: a valid A/B log is refused: $(head -c 300 "$WORK/.err")" >&2
      continue
    fi
    tried "$C"
    judge_cli "$C" "$name" "ab report" "$base"
    if [ "$R_RC" = 0 ] && [ -z "$R_SIG" ]; then
      case $name in
        arms_* | shadows_* | records_* | record_* | truncated_last_line | bom_crlf | empty_file | newlines_*) ;;
        *) anomaly "$C" "$name" "exit 0 ($(wc -c <"$WORK/.out") bytes of report)" ;;
      esac
    fi
  done <"$WORK/ablog/manifest.tsv"
  note "$C" "specd ab report on each; idle = a 3-record log"
}

# ---- 4. plugins ----------------------------------------------------------------------------
# ldso_abort INPUT WHAT: the dynamic loader's own assertion ("Inconsistency detected by ld.so")
# ends the whole process with exit 127 and no output: the host was taken down as surely as by a
# signal, so it counts as a crash.
ldso_abort() {
  if [ -z "$R_SIG" ] && [ "$R_RC" = 127 ] && grep -q 'Inconsistency detected by ld.so' "$WORK/.err"; then
    fail plugins crash "$1" "$2: the process ended inside dlopen (exit 127, $(grep -m1 -o 'Inconsistency detected by ld.so: [^:]*' "$WORK/.err"))"
  fi
}

run_plugins() {
  CUR="plugins"
  local C="plugins" rc name dir base_l=0 base_v=0 n=0 listed serves=0 want
  local real=$PLUGIN_DIR/specd_proposer_ngram.so
  [ -f "$real" ] || { echo "hostile-campaign: $real is missing" >&2; return; }
  gen plugins "$real"
  mkdir -p "$WORK/empty"
  plugin_cfg() {
    cat >"$WORK/plugins.yaml" <<EOF
model: {path: $MODEL, dtype: f32, num_threads: 1}
speculative:
  num_speculative_tokens: 2
  proposer: {name: ngram}
  verifier: rejection
kv_cache: {memory_mib: 32}
server: {shutdown_timeout_s: $SHUTDOWN_S}
plugins:
  paths: [$1]
EOF
  }
  plugin_cfg "$WORK/empty"
  SPECD_PLUGIN_PATH=$WORK/empty cli_run "$LIMIT_S" "$WORK/.out" "$WORK/.err" "$SPECD" plugins list
  base_l=$R_KB
  want=$(grep -c '(ABI' "$WORK/.out")
  cli_run "$LIMIT_S" "$WORK/.out" "$WORK/.err" "$SPECD" validate --config "$WORK/plugins.yaml"
  base_v=$R_KB
  while IFS=$'\t' read -r name dir; do
    wanted "$name" || continue
    tried "$C"
    n=$((n + 1))
    SPECD_PLUGIN_PATH=$dir cli_run "$LIMIT_S" "$WORK/.out" "$WORK/.err" "$SPECD" plugins list
    judge_cli "$C" "$name" "plugins list" "$base_l"
    ldso_abort "$name" "plugins list"
    listed=$(grep -c '(ABI' "$WORK/.out")
    if [ "$R_RC" = 0 ] && [ "$listed" -lt "$want" ]; then
      anomaly "$C" "$name" "plugins list shows $listed of the $want built-in plugins"
    fi
    plugin_cfg "$dir"
    cli_run "$LIMIT_S" "$WORK/.out" "$WORK/.err" "$SPECD" validate --config "$WORK/plugins.yaml"
    judge_cli "$C" "$name" "validate" "$base_v"
    ldso_abort "$name" "validate"
    # server start-up: every 8th candidate, the special files and the directory of all of them
    if [ $((n % 8)) = 1 ] || [[ $name == special_* || $name == all_* || $name == init_array* || $name == dynsym* ]]; then
      serves=$((serves + 1))
      start_server "$WORK/plug.log" --config "$WORK/plugins.yaml"
      rc=$?
      vlog "$name: serve start-up: $(start_outcome "$rc" "$WORK/plug.log")"
      case $rc in
        0) stop_server ;;
        1)
          [ -n "$(signal_of "$SRV_RC")" ] && fail "$C" crash "$name" "serve start-up: killed by SIG$(signal_of "$SRV_RC")"
          [ "$SRV_RC" = 127 ] && grep -q 'Inconsistency detected by ld.so' "$WORK/plug.log" &&
            fail "$C" crash "$name" "serve start-up: the process ended inside dlopen (exit 127, ld.so assertion)"
          ;;
        2) fail "$C" hang "$name" "serve start-up: $(start_outcome 2 "$WORK/plug.log")"; stop_server 1 ;;
      esac
    fi
  done <"$WORK/plugins/manifest.tsv"
  note "$C" "mutants of $(basename "$real"): plugins list and validate each, serve start-up for $serves"
}

# ---- 5. HTTP -------------------------------------------------------------------------------
run_http() {
  CUR="HTTP small items"
  local C="HTTP small items" name method path body transfer expect restarts=0
  gen http
  http_start() {
    start_server "$WORK/http.log" --model "$MODEL" "${SERVE_ARGS[@]}" --set server.max_body_bytes=16777216 || {
      echo "hostile-campaign: the HTTP server did not start: $(tail -3 "$WORK/http.log")" >&2
      return 1
    }
  }
  http_start || return
  while IFS=$'\t' read -r name method path body transfer expect; do
    wanted "$name" || continue
    tried "$C"
    http_req "$SRV_URL$path" "$method" "$body" "$transfer" "$WORK/.resp"
    judge_http "$C" "$name" "$method $path" "$expect"
    local peak
    peak=$(srv_peak_kb)
    if srv_alive && [ "$peak" -gt $((SRV_IDLE_KB + RSS_OVER_KB)) ]; then
      fail "$C" rss "$name" "server peak RSS $((peak / 1024)) MB after it (idle $((SRV_IDLE_KB / 1024)) MB)"
    fi
    # a fresh server after a crash or an RSS failure, so the next input is judged alone
    if ! srv_alive || [ "$peak" -gt $((SRV_IDLE_KB + RSS_OVER_KB)) ]; then
      srv_alive && stop_server
      restarts=$((restarts + 1))
      http_start || return
    fi
  done <"$WORK/http/manifest.tsv"
  stop_server
  [ "$STOP_MS" -gt $(((SHUTDOWN_S + 1) * 1000)) ] && anomaly "$C" "(shutdown)" "exit $(secs "$STOP_MS") s after SIGTERM"
  note "$C" "one server (max_body_bytes 16 MiB), $restarts restart(s)"
}

