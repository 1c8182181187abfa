#!/usr/bin/env bash
# dsv4 serve over loopback with curl: every malformed input's status code and error body, the
# API key, unknown model, body size, queue full, /health, /v1/models, /metrics, completions and
# chat (streaming and not), a client that leaves mid-stream (its request is cancelled and
# nothing stays running), and SIGTERM (running streams finish, exit code 0).
# Usage: server_curl.sh /path/to/dsv4 WORKDIR
set -uo pipefail
dsv4=$1
work=$2
rm -rf "$work" && mkdir -p "$work"
fails=0
pids=()
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
cleanup() { for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done; }
trap cleanup EXIT

"$dsv4" make-tiny --out "$work/tiny" >"$work/make_tiny.log" 2>&1 || { cat "$work/make_tiny.log"; exit 1; }

# start_server NAME ARGS...: starts dsv4 serve on a free port; sets $pid and $url.
start_server() {
  local name=$1; shift
  "$dsv4" serve --port 0 "$@" >"$work/$name.out" 2>"$work/$name.err" &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 600); do
    url=$(sed -n 's/^dsv4 serve: listening on //p' "$work/$name.out" 2>/dev/null)
    [ -n "$url" ] && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "server $name did not start:"; cat "$work/$name.out" "$work/$name.err"; exit 1
}

# expect STATUS PARAM CODE METHOD PATH [BODY]: the response has STATUS and, for errors, an
# OpenAI error body whose param (or null for "-") and code (unless "*") match.
expect() {
  local status=$1 param=$2 code=$3 method=$4 path=$5 body=${6-}
  local args=(-s -o "$work/body" -w "%{http_code}" -X "$method" "$url$path" -H "Content-Type: application/json")
  [ -n "${auth-}" ] && args+=(-H "Authorization: Bearer $auth")
  [ $# -ge 6 ] && args+=(--data-binary "$body")
  local got
  got=$(curl "${args[@]}")
  if [ "$got" != "$status" ]; then fail "$method $path ${body:0:80}: status $got, expected $status: $(head -c 300 "$work/body")"; return; fi
  if [ "$status" -ge 400 ]; then
    local p c
    p=$(jq -r '.error.param // "-"' "$work/body" 2>/dev/null) || { fail "$path: error body is not JSON: $(cat "$work/body")"; return; }
    c=$(jq -r '.error.code // "-"' "$work/body")
    jq -e '.error.message | type == "string" and length > 0' "$work/body" >/dev/null || fail "$path: no error message"
    [ "$p" = "$param" ] || fail "$method $path ${body:0:80}: param '$p', expected '$param'"
    [ "$code" = "*" ] || [ "$c" = "$code" ] || fail "$method $path ${body:0:80}: code '$c', expected '$code'"
  fi
}

metric() { curl -s "$url/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

start_server main --model "$work/tiny" --max-body-bytes 65536 --max-context 256 --batch-size 4
main_pid=$pid
grep -q ', prefix cache [0-9]* blocks' "$work/main.out" || fail "serve without the prefix cache by default: $(cat "$work/main.out")"

# Health, models, metrics.
expect 200 - - GET /health
jq -e '.status == "ok"' "$work/body" >/dev/null || fail "/health: $(cat "$work/body")"
expect 200 - - GET /v1/models
jq -e '.object == "list" and (.data | length) == 1 and .data[0].id == "tiny" and .data[0].object == "model"' \
  "$work/body" >/dev/null || fail "/v1/models: $(cat "$work/body")"
expect 200 - - GET /v1/models/tiny
expect 404 model model_not_found GET /v1/models/gpt-4
expect 404 - not_found GET /v1/nothing
expect 200 - - GET /
grep -qi "<html" "$work/body" || fail "GET / is not an HTML page"

# Malformed requests: status, param and code.
C=/v1/completions
H=/v1/chat/completions
M='"messages": [{"role": "user", "content": "hi"}]'
expect 400 - invalid_json POST $C '{"prompt": "hi",'
expect 400 - invalid_json POST $C ''
expect 400 - invalid_json POST $H 'not json at all'
expect 400 - '*' POST $C '[1, 2, 3]'
expect 400 prompt missing_required_parameter POST $C '{}'
expect 400 messages missing_required_parameter POST $H '{"model": "tiny"}'
expect 400 prompt '*' POST $C '{"prompt": 5}'
expect 400 'prompt[1]' '*' POST $C '{"prompt": [1, "x"]}'
expect 400 prompt '*' POST $C '{"prompt": [1, 99999]}'
expect 400 prompt unsupported_parameter POST $C '{"prompt": ["a", "b"]}'
expect 400 messages '*' POST $H '{"messages": "hi"}'
expect 400 messages '*' POST $H '{"messages": [{"role": "robot", "content": "hi"}]}'
expect 400 temperature '*' POST $C '{"prompt": "hi", "temperature": "hot"}'
expect 400 temperature '*' POST $C '{"prompt": "hi", "temperature": 3}'
expect 400 top_p '*' POST $H "{$M, \"top_p\": 0}"
expect 400 max_tokens '*' POST $C '{"prompt": "hi", "max_tokens": "10"}'
expect 400 max_tokens '*' POST $C '{"prompt": "hi", "max_tokens": -3}'
expect 400 stream '*' POST $C '{"prompt": "hi", "stream": 1}'
expect 400 stop '*' POST $C '{"prompt": "hi", "stop": ["a", "b", "c", "d", "e"]}'
expect 400 seed '*' POST $C '{"prompt": "hi", "seed": "x"}'
expect 400 logprobs '*' POST $C '{"prompt": "hi", "logprobs": 9}'
expect 400 top_logprobs '*' POST $H "{$M, \"top_logprobs\": 3}"
expect 400 n '*' POST $C '{"prompt": "hi", "n": 9}'  # --max-n 8
expect 400 n '*' POST $H "{$M, \"n\": 0}"
expect 400 best_of '*' POST $C '{"prompt": "hi", "n": 3, "best_of": 2}'
expect 400 best_of '*' POST $C '{"prompt": "hi", "best_of": 9}'
expect 400 best_of '*' POST $C '{"prompt": "hi", "best_of": 2, "stream": true}'
expect 400 best_of unsupported_parameter POST $H "{$M, \"best_of\": 2}"
expect 400 echo unsupported_parameter POST $C '{"prompt": "hi", "n": 2, "echo": true, "logprobs": 1}'
expect 400 frequency_penalty '*' POST $H "{$M, \"frequency_penalty\": 3}"
expect 400 repetition_penalty '*' POST $C '{"prompt": "hi", "repetition_penalty": 0}'
expect 400 logit_bias '*' POST $C '{"prompt": "hi", "logit_bias": {"5": 101}}'
expect 400 logit_bias '*' POST $C '{"prompt": "hi", "logit_bias": {"999999": 1}}'
# A pattern outside the supported subset: a 400 under strict (relaxed to any string without it).
expect 400 response_format '*' POST $H "{$M, \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\", \"strict\": true, \"schema\": {\"type\": \"string\", \"pattern\": \"(?=a)b\"}}}}"
# Structured output: the random tiny model's answer is the schema's value (then EOS: stop).
expect 200 - - POST $H "{$M, \"max_tokens\": 64, \"temperature\": 0, \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\", \"schema\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}, \"required\": [\"a\"], \"additionalProperties\": false}}}}"
jq -e '.choices[0].finish_reason == "stop" and (.choices[0].message.content | fromjson | (keys == ["a"]) and (.a | type == "number" and floor == .))' \
  "$work/body" >/dev/null || fail "json_schema: $(cat "$work/body")"
# strict false or absent (OpenAI's default): a keyword the engine cannot enforce is relaxed and
# named in X-Relaxed-Keywords (strict true: a 400); the value is compact (", " and ": " only).
S='"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {"a": {"type": "integer", "not": {"const": 3}}}, "required": ["a"], "additionalProperties": false}'
expect 400 response_format '*' POST $H "{$M, $S, \"strict\": true}}}"
curl -s -o "$work/body" -D "$work/relaxed.txt" "$url$H" -H "Content-Type: application/json" \
  -d "{$M, \"max_tokens\": 64, \"temperature\": 0, $S}}}"
relaxed=$(tr -d '\r' <"$work/relaxed.txt" | awk 'tolower($0) ~ /^x-relaxed-keywords: / { sub(/^[^:]*: /, ""); print }')
[ "$relaxed" = "/properties/a: not" ] || fail "X-Relaxed-Keywords: '$relaxed' ($(cat "$work/relaxed.txt"))"
jq -e '.choices[0].message.content | test("^\\{\"a\": -?[0-9]+\\}$")' "$work/body" >/dev/null ||
  fail "strict false json_schema (compact): $(cat "$work/body")"
# vLLM's constraints on both routes: the whole text is in the language, then EOS (stop).
expect 200 - - POST $C '{"prompt": "hi", "max_tokens": 32, "temperature": 0, "structured_outputs": {"regex": "[0-9]{3}-[a-z]{2}"}}'
jq -e '.choices[0].finish_reason == "stop" and (.choices[0].text | test("^[0-9]{3}-[a-z]{2}$"))' "$work/body" >/dev/null ||
  fail "structured_outputs.regex: $(cat "$work/body")"
expect 200 - - POST $H "{$M, \"max_tokens\": 32, \"guided_choice\": [\"yes\", \"no\", \"maybe not\"]}"
jq -e '.choices[0].finish_reason == "stop" and (.choices[0].message.content | IN("yes", "no", "maybe not"))' "$work/body" \
  >/dev/null || fail "guided_choice: $(cat "$work/body")"
G='root ::= word (\" \" word){0,2} \".\"\nword ::= [a-z]{1,4}'
expect 200 - - POST $C "{\"prompt\": \"hi\", \"max_tokens\": 32, \"structured_outputs\": {\"grammar\": \"$G\"}}"
jq -e '.choices[0].finish_reason == "stop" and (.choices[0].text | test("^[a-z]{1,4}( [a-z]{1,4}){0,2}[.]$"))' \
  "$work/body" >/dev/null || fail "structured_outputs.grammar: $(cat "$work/body")"
expect 400 structured_outputs '*' POST $C '{"prompt": "hi", "structured_outputs": {"grammar": "root ::= \"(\" root \")\" | \"\""}}'
grep -q "rule 'root' is recursive" "$work/body" || fail "recursive grammar: $(cat "$work/body")"
expect 400 guided_regex '*' POST $H "{$M, \"guided_regex\": \"a\", \"guided_choice\": [\"b\"]}"
expect 400 structured_outputs unsupported_parameter POST $C '{"prompt": "hi", "structured_outputs": {"whitespace_pattern": " "}}'
expect 400 suffix unsupported_parameter POST $C '{"prompt": "hi", "suffix": "x"}'
expect 400 bogus unsupported_parameter POST $C '{"prompt": "hi", "bogus": 1}'
expect 404 model model_not_found POST $C '{"model": "gpt-4", "prompt": "hi"}'
expect 404 model model_not_found POST $H "{$M, \"model\": \"other\"}"
long=$(printf 'word %.0s' $(seq 400))
expect 400 prompt context_length_exceeded POST $C "{\"prompt\": \"$long\"}"
expect 400 messages context_length_exceeded POST $H "{\"messages\": [{\"role\": \"user\", \"content\": \"$long\"}]}"
expect 400 max_tokens context_length_exceeded POST $C '{"prompt": "hi", "max_tokens": 300}'
# Neutral values of unsupported fields are fine.
expect 200 - - POST $C '{"prompt": "hi", "max_tokens": 2, "n": 1, "frequency_penalty": 0, "logit_bias": {}, "suffix": null}'
# Body over --max-body-bytes.
head -c 70000 /dev/zero | tr '\0' a | sed 's/^/{"prompt": "/; s/$/"}/' >"$work/big.json"
expect 413 - request_too_large POST $C "$(cat "$work/big.json")"
# A chunked body over the limit is refused too (no Content-Length to check up front).
got=$(curl -s -o "$work/body" -w "%{http_code}" "$url$C" -H "Content-Type: application/json" \
  -H "Transfer-Encoding: chunked" --data-binary @"$work/big.json")
[ "$got" = 413 ] || fail "chunked body over the limit: status $got"

# Access checks (docs/serving.md): JSON only, loopback Host names, no foreign Origin.
code_of() { curl -s -o "$work/body" -w "%{http_code}" "$@"; }
[ "$(code_of "$url$C" -H "Content-Type: text/plain" -d '{"prompt": "hi"}')" = 415 ] || fail "text/plain POST not 415"
[ "$(code_of "$url$C" -d '{"prompt": "hi"}')" = 415 ] || fail "form-encoded POST not 415"
[ "$(code_of "$url/health" -H "Host: evil.example")" = 421 ] || fail "a foreign Host not 421"
[ "$(code_of "$url/health" -H "Host: localhost:1")" = 200 ] || fail "Host localhost refused"
[ "$(code_of "$url$C" -H "Content-Type: application/json" -H "Origin: http://evil.example" \
      -d '{"prompt": "hi", "max_tokens": 1}')" = 403 ] || fail "a foreign Origin not 403"
same_origin=${url#http://}
[ "$(code_of "$url$C" -H "Content-Type: application/json" -H "Origin: $url" \
      -d '{"prompt": "hi", "max_tokens": 1}')" = 200 ] || fail "the same origin ($same_origin) refused"
[ "$(code_of -X OPTIONS "$url$C" -H "Origin: http://evil.example")" = 403 ] || fail "preflight without --cors-origin"

# Completions and chat, not streamed.
expect 200 - - POST $C '{"model": "tiny", "prompt": "Hello", "max_tokens": 8, "temperature": 0, "logprobs": 2}'
jq -e '.object == "text_completion" and (.choices[0].text | type) == "string" and .usage.completion_tokens >= 1
       and .usage.total_tokens == .usage.prompt_tokens + .usage.completion_tokens
       and (.choices[0].logprobs.tokens | length) == .usage.completion_tokens
       and (.choices[0].finish_reason == "length" or .choices[0].finish_reason == "stop")
       and (.choices[0] | has("stop_reason"))' "$work/body" >/dev/null ||
  fail "completion: $(cat "$work/body")"
# A stop string met in the greedy text (two characters from the third on, none of them U+FFFD,
# which stands for bytes that are not UTF-8): finish_reason stop, stop_reason the string, the
# text cut before it (non-streamed and streamed).
expect 200 - - POST $C '{"prompt": "Hello", "max_tokens": 16, "temperature": 0, "ignore_eos": true}'
cp "$work/body" "$work/greedy.json"
pick='. as $t | [range(2; length - 1) | $t[.:. + 2] | select(test("\ufffd") | not)] | first'
jq -e ".choices[0].text | $pick | type == \"string\"" "$work/greedy.json" >/dev/null ||
  fail "no stop string in the greedy text: $(cat "$work/body")"
stopped="(\$g[0].choices[0].text) as \$t | (\$t | $pick) as \$s
         | .choices[0].finish_reason == \"stop\" and .choices[0].stop_reason == \$s"
body=$(jq -c "{prompt: \"Hello\", max_tokens: 16, temperature: 0, ignore_eos: true, stop: [.choices[0].text | $pick]}" \
       "$work/greedy.json")
expect 200 - - POST $C "$body"
jq -e --slurpfile g "$work/greedy.json" "$stopped"' and .choices[0].text == ($t | split($s) | .[0])' "$work/body" \
  >/dev/null || fail "stop string: $(cat "$work/body") after $(cat "$work/greedy.json")"
curl -s -N "$url$C" -H "Content-Type: application/json" -d "$(jq -c '.stream = true' <<<"$body")" >"$work/stream_stop.txt"
grep '^data: {' "$work/stream_stop.txt" | tail -1 | sed 's/^data: //' |
  jq -e --slurpfile g "$work/greedy.json" "$stopped" >/dev/null ||
  fail "streamed stop string: $(tail -c 300 "$work/stream_stop.txt")"
expect 200 - - POST $H "{$M, \"max_tokens\": 8, \"seed\": 5, \"logprobs\": true, \"top_logprobs\": 2}"
jq -e '.object == "chat.completion" and .choices[0].message.role == "assistant"
       and (.choices[0].logprobs.content | length) == .usage.completion_tokens
       and (.choices[0].logprobs.content[0].top_logprobs | length) == 2' "$work/body" >/dev/null ||
  fail "chat: $(cat "$work/body")"
expect 200 - - POST $H "{$M, \"max_tokens\": 8, \"thinking\": true}"
jq -e '.choices[0].message | has("reasoning_content")' "$work/body" >/dev/null || fail "thinking chat: $(cat "$work/body")"

# system_fingerprint and usage details (cached_tokens 0 without --prefix-blocks; reasoning
# tokens within the completion in thinking mode).
jq -e '(.system_fingerprint | startswith("fp_dsv4_")) and .usage.prompt_tokens_details.cached_tokens == 0
       and (.usage.completion_tokens_details.reasoning_tokens | type) == "number"
       and .usage.completion_tokens_details.reasoning_tokens <= .usage.completion_tokens' "$work/body" >/dev/null ||
  fail "usage details / system_fingerprint: $(cat "$work/body")"
# Fields the SDKs send that change nothing are accepted; their types are checked.
expect 200 - - POST $H "{$M, \"max_tokens\": 2, \"store\": false, \"metadata\": {\"k\": \"v\"}, \"service_tier\": \"auto\", \"user\": \"u\"}"
expect 400 metadata.k '*' POST $H "{$M, \"max_tokens\": 2, \"metadata\": {\"k\": 1}}"
expect 200 - - POST $C '{"prompt": "hi", "max_tokens": 2, "stream": true, "stream_options": {"include_usage": true, "continuous_usage_stats": true}}'

# X-Request-Id: echoed, else generated (the response id for a generation), on errors too; and
# one access-log line per request on stderr.
req_id() { tr -d '\r' <"$1" | awk -F': ' 'tolower($1) == "x-request-id" { print $2 }'; }
curl -s -o "$work/body" -D "$work/rid.txt" "$url$H" -H "Content-Type: application/json" -H "X-Request-Id: my-req-1" \
  -d "{$M, \"max_tokens\": 4}"
[ "$(req_id "$work/rid.txt")" = my-req-1 ] || fail "X-Request-Id not echoed: $(cat "$work/rid.txt")"
curl -s -o "$work/body" -D "$work/rid.txt" "$url$H" -H "Content-Type: application/json" -d "{$M, \"max_tokens\": 4}"
[ "$(req_id "$work/rid.txt")" = "$(jq -r .id "$work/body")" ] || fail "generated X-Request-Id is not the response id"
curl -s -o "$work/body" -D "$work/rid.txt" "$url$C" -H "Content-Type: application/json" \
  -H "X-Request-Id: $(printf 'x%.0s' $(seq 200))" -d '{"prompt": 5}'
rid=$(req_id "$work/rid.txt")
[ -n "$rid" ] && [ ${#rid} -le 128 ] || fail "a 400 with an over-long X-Request-Id: '$rid'"
curl -s -N -D "$work/rid.txt" -o /dev/null "$url$C" -H "Content-Type: application/json" -H "X-Request-Id: s-2" \
  -d '{"prompt": "x", "max_tokens": 3, "stream": true}'
[ "$(req_id "$work/rid.txt")" = s-2 ] || fail "stream without the X-Request-Id"
[ -n "$(curl -s -o /dev/null -D - "$url/v1/nothing" | tr -d '\r' | grep -i '^x-request-id: req-')" ] ||
  fail "a 404 without a generated X-Request-Id"
# The log keeps the server's id and the client's X-Request-Id apart.
logged=
for _ in $(seq 50); do
  logged=$(grep '"client_id":"my-req-1"' "$work/main.err") && break
  sleep 0.1
done
jq -e '(.id | startswith("chatcmpl-")) and .client_id == "my-req-1"
       and .route == "/v1/chat/completions" and .status == 200 and .prompt_tokens > 0 and .completion_tokens >= 1
       and .cached_tokens == 0 and (.ttft_ms | type) == "number" and .total_ms >= .ttft_ms' <<<"$logged" >/dev/null ||
  fail "access log line: '$logged'"
for _ in $(seq 50); do grep -q '"client_id":"s-2"' "$work/main.err" && break; sleep 0.1; done
grep '"client_id":"s-2"' "$work/main.err" | jq -e '(.id | startswith("cmpl-")) and .status == 200
  and .route == "/v1/completions" and .completion_tokens >= 1' >/dev/null ||
  fail "access log of a stream: $(grep '"s-2"' "$work/main.err")"
grep '"route":"/health"' "$work/main.err" | head -1 | jq -e '(.id | startswith("req-")) and .client_id == null' \
  >/dev/null || fail "access log without a client id: $(grep '"route":"/health"' "$work/main.err" | head -1)"

# vLLM's /tokenize and /detokenize.
expect 200 - - POST /tokenize '{"prompt": "Hello world"}'
jq -e '.count == (.tokens | length) and .count > 0 and .max_model_len == 256' "$work/body" >/dev/null ||
  fail "/tokenize: $(cat "$work/body")"
ids=$(jq -c .tokens "$work/body")
expect 200 - - POST /detokenize "{\"model\": \"tiny\", \"tokens\": $ids}"
jq -e '.prompt | endswith("Hello world")' "$work/body" >/dev/null || fail "/detokenize: $(cat "$work/body")"
expect 200 - - POST /tokenize "{$M}"
jq -e '.count > 0' "$work/body" >/dev/null || fail "/tokenize messages: $(cat "$work/body")"
expect 400 'tokens[1]' '*' POST /detokenize '{"tokens": [1, 99999]}'
# logit_bias +100 on one id makes greedy emit it (the text of /detokenize of it thrice); the
# penalties are accepted in their ranges.
expect 200 - - POST /detokenize '{"tokens": [300, 300, 300]}'
want=$(jq -r .prompt "$work/body")
expect 200 - - POST $C '{"prompt": "Hello", "max_tokens": 3, "temperature": 0, "ignore_eos": true, "logit_bias": {"300": 100}}'
jq -e --arg w "$want" '.choices[0].text == $w' "$work/body" >/dev/null || fail "logit_bias: $(cat "$work/body"), want $want"
expect 200 - - POST $H "{$M, \"max_tokens\": 4, \"frequency_penalty\": 2, \"presence_penalty\": -2, \"repetition_penalty\": 1.5}"
expect 400 prompt '*' POST /tokenize '{"prompt": 5}'
expect 400 bogus unsupported_parameter POST /tokenize '{"prompt": "x", "bogus": 1}'
expect 404 model model_not_found POST /tokenize '{"model": "gpt-4", "prompt": "x"}'
[ "$(code_of "$url/tokenize" -H "Content-Type: text/plain" -d '{"prompt": "hi"}')" = 415 ] || fail "text/plain /tokenize not 415"

# Streams: data: chunks, usage when asked, [DONE] last.
check_stream() {  # check_stream FILE OBJECT
  local file=$1 object=$2
  [ "$(grep -c '^data: ' "$file")" -ge 2 ] || { fail "stream $file has no chunks: $(head -c 300 "$file")"; return; }
  [ "$(grep '^data: ' "$file" | tail -1)" = "data: [DONE]" ] || fail "stream $file does not end with [DONE]"
  grep '^data: ' "$file" | grep -v '^data: \[DONE\]$' | sed 's/^data: //' | jq -e --arg o "$object" '.object == $o' \
    >/dev/null || fail "stream $file: a chunk is not a $object"
}
curl -s -N "$url$C" -H "Content-Type: application/json" -d '{"prompt": "Once", "max_tokens": 12, "stream": true, "stream_options": {"include_usage": true}}' \
  >"$work/stream_c.txt"
check_stream "$work/stream_c.txt" text_completion
grep '^data: {' "$work/stream_c.txt" | tail -1 | sed 's/^data: //' | jq -e '.usage.completion_tokens >= 1 and .choices == []' \
  >/dev/null || fail "completion stream: no usage chunk"
curl -s -N "$url$H" -H "Content-Type: application/json" -d "{$M, \"max_tokens\": 12, \"stream\": true}" >"$work/stream_h.txt"
check_stream "$work/stream_h.txt" chat.completion.chunk
grep '^data: {' "$work/stream_h.txt" | head -1 | sed 's/^data: //' | jq -e '.choices[0].delta.role == "assistant"' \
  >/dev/null || fail "chat stream: first delta has no role"
grep '^data: {' "$work/stream_h.txt" | tail -1 | sed 's/^data: //' | jq -e '.choices[0].finish_reason != null' \
  >/dev/null || fail "chat stream: no finish_reason"

# Several choices: n = 3 equals three lone requests with the derived seeds (choice 0: the
# request's seed, so its text equals n = 1's); usage counts the prompt once; the stream's
# chunks carry index, each choice one finish_reason, one usage chunk and one [DONE]; best_of
# returns the best of the same choices.
choice_req='{"prompt": "Once", "max_tokens": 6, "seed": 7, "temperature": 1, "ignore_eos": true'
expect 200 - - POST $C "$choice_req}"
cp "$work/body" "$work/n1.json"
expect 200 - - POST $C "$choice_req, \"n\": 3}"
cp "$work/body" "$work/n3.json"
jq -e '(.choices | length) == 3 and ([.choices[].index] == [0, 1, 2]) and all(.choices[]; .finish_reason == "length")
       and .usage.completion_tokens == 18' "$work/n3.json" >/dev/null || fail "n = 3: $(head -c 400 "$work/n3.json")"
[ "$(jq '.usage.prompt_tokens' "$work/n3.json")" = "$(jq '.usage.prompt_tokens' "$work/n1.json")" ] ||
  fail "n = 3 counts the prompt more than once: $(jq -c .usage "$work/n3.json")"
[ "$(jq -r '.choices[0].text' "$work/n3.json")" = "$(jq -r '.choices[0].text' "$work/n1.json")" ] ||
  fail "n = 3: choice 0 differs from n = 1 with the same seed"
[ "$(jq -r '.choices | map(.text) | unique | length' "$work/n3.json")" -ge 2 ] ||
  fail "n = 3: the choices sample with the same seed: $(jq -c '[.choices[].text]' "$work/n3.json")"
curl -s -N "$url$C" -H "Content-Type: application/json" \
  -d "$choice_req, \"n\": 3, \"stream\": true, \"stream_options\": {\"include_usage\": true}}" >"$work/stream_n3.txt"
check_stream "$work/stream_n3.txt" text_completion
[ "$(grep -c '^data: \[DONE\]' "$work/stream_n3.txt")" = 1 ] || fail "n = 3 stream: not one [DONE]"
grep '^data: {' "$work/stream_n3.txt" | sed 's/^data: //' | jq -s -e --slurpfile whole "$work/n3.json" '
  ([.[] | select(.choices == []) | .usage.completion_tokens] == [18]) and
  ([.[] | .choices[] | select(.finish_reason != null) | .index] | sort == [0, 1, 2]) and
  ([range(3) as $i | [.[] | .choices[] | select(.index == $i) | .text] | add] == [$whole[0].choices[].text])' \
  >/dev/null || fail "n = 3 stream: $(head -c 600 "$work/stream_n3.txt")"
expect 200 - - POST $C "$choice_req, \"n\": 1, \"best_of\": 3}"
jq -e --slurpfile three "$work/n3.json" '(.choices | length) == 1 and .choices[0].logprobs == null and
  .usage.completion_tokens == 18 and (.choices[0].text as $t | any($three[0].choices[]; .text == $t))' "$work/body" \
  >/dev/null || fail "best_of 3: $(head -c 400 "$work/body")"

curl -s "$url/metrics" >"$work/metrics.txt"
for m in dsv4_requests_finished_total dsv4_http_requests_total dsv4_prompt_tokens_total dsv4_generation_tokens_total \
         dsv4_requests_running dsv4_requests_queued dsv4_batch_size_bucket dsv4_step_seconds_bucket \
         dsv4_mtp_acceptance_ratio; do
  grep -q "^$m" "$work/metrics.txt" || fail "/metrics has no $m"
done
grep -q '^dsv4_http_requests_total{route="/v1/completions",code="400"}' "$work/metrics.txt" ||
  fail "/metrics does not count the 400s"

# SIGTERM with a stream running: it finishes (grace), the server exits 0.
curl -s -N "$url$C" -H "Content-Type: application/json" -d '{"prompt": "x", "max_tokens": 60, "stream": true}' >"$work/stream_term.txt" &
curl_pid=$!
sleep 0.3
kill -TERM "$main_pid"
wait "$curl_pid"
wait "$main_pid"
code=$?
[ "$code" = 0 ] || fail "serve exited $code after SIGTERM: $(tail -5 "$work/main.err")"
grep -q 'data: \[DONE\]' "$work/stream_term.txt" || fail "the stream running at SIGTERM did not finish"

# --api-key: 401 without the bearer token; a client that leaves a long stream; the queue
# limit: 429 with Retry-After. A model with a long context, so that a stream outlasts curl.
"$dsv4" make-tiny --out "$work/tiny4k" --max-position 4096 >"$work/make_tiny.log" 2>&1 ||
  { cat "$work/make_tiny.log"; exit 1; }
start_server keyed --model "$work/tiny4k" --api-key sekret --batch-size 1 --max-queue 1 --max-context 4096 \
  --request-timeout 1.5 --test-min-step-seconds 0.01  # 4000 tokens take >= 40 s on any machine
keyed_pid=$pid
expect 401 - invalid_api_key GET /v1/models
auth=wrong expect 401 - invalid_api_key POST $C '{"prompt": "hi"}'
expect 401 - invalid_api_key POST /tokenize '{"prompt": "hi"}'
auth=sekret expect 200 - - POST /detokenize '{"tokens": [5]}'
auth=sekret expect 200 - - GET /v1/models
expect 200 - - GET /health
# A client that leaves mid-stream: its request is cancelled; nothing stays running.
cancelled_before=$(metric 'dsv4_requests_finished_total{reason="cancelled"}')
curl -s -N --max-time 1 -H "Authorization: Bearer sekret" -H "Content-Type: application/json" "$url$C" \
  -d '{"prompt": "x", "max_tokens": 4000, "stream": true, "ignore_eos": true}' >"$work/stream_cut.txt"
for _ in $(seq 100); do
  [ "$(metric dsv4_requests_running)" = 0 ] && [ "$(metric dsv4_requests_queued)" = 0 ] && break
  sleep 0.1
done
[ "$(metric dsv4_requests_running)" = 0 ] || fail "after a disconnect: $(metric dsv4_requests_running) requests still running"
grep -q 'data: \[DONE\]' "$work/stream_cut.txt" && fail "the stream to cut finished within 1 s (the step hook did not slow it)"
[ "$(metric 'dsv4_requests_finished_total{reason="cancelled"}')" -gt "${cancelled_before:-0}" ] ||
  fail "a disconnected stream was not cancelled"
pages_free=$(metric dsv4_cache_pages_free)
pages_total=$(metric dsv4_cache_pages_total)
[ -n "$pages_total" ] && [ "$pages_free" = "$pages_total" ] || fail "pages not freed: $pages_free of $pages_total"
# --request-timeout: a non-streamed request that would run long ends with finish_reason length
# (an OpenAI value) and stop_reason timeout.
auth=sekret expect 200 - - POST $C '{"prompt": "x", "max_tokens": 4000, "ignore_eos": true}'
jq -e '.choices[0].finish_reason == "length" and .choices[0].stop_reason == "timeout"
       and .usage.completion_tokens < 4000' "$work/body" >/dev/null ||
  fail "--request-timeout: $(head -c 300 "$work/body")"
for i in $(seq 6); do
  curl -s -D "$work/h$i.txt" -o "$work/b$i.txt" -H "Authorization: Bearer sekret" -H "Content-Type: application/json" "$url$C" \
    -d '{"prompt": "x", "max_tokens": 4000, "ignore_eos": true}' &  # each runs until --request-timeout
done
wait $(jobs -p | grep -v "^$keyed_pid$") 2>/dev/null
n429=$(grep -l '^HTTP/1.1 429' "$work"/h?.txt | wc -l)
[ "$n429" -ge 1 ] || fail "6 requests at batch 1 and queue 1 gave no 429"
for f in $(grep -l '^HTTP/1.1 429' "$work"/h?.txt); do
  grep -qi '^Retry-After: ' "$f" || fail "429 without Retry-After"
done
kill -TERM "$keyed_pid"
wait "$keyed_pid" || fail "keyed server exit code $?"

# The key from --api-key-file or DSV4_API_KEY (not the process list); CORS for --cors-origin only.
printf 'filekey\n' >"$work/key"
start_server filekeyed --model "$work/tiny" --api-key-file "$work/key" --cors-origin http://app.example \
  --max-context 256 --batch-size 2 --access-log off --prefix-blocks 0
filekeyed_pid=$pid
grep -q 'prefix cache' "$work/filekeyed.out" && fail "--prefix-blocks 0 still caches: $(cat "$work/filekeyed.out")"
auth=filekey expect 200 - - GET /v1/models
auth=sekret expect 401 - invalid_api_key GET /v1/models
ps -o args= -p "$filekeyed_pid" | grep -q filekey && fail "the key from --api-key-file is in the process list"
got=$(curl -s -o /dev/null -D "$work/pre.txt" -w "%{http_code}" -X OPTIONS "$url$C" -H "Origin: http://app.example" \
  -H "Access-Control-Request-Method: POST" -H "Access-Control-Request-Headers: content-type")
[ "$got" = 204 ] || fail "CORS preflight of --cors-origin: status $got"
grep -qi '^Access-Control-Allow-Origin: http://app.example' "$work/pre.txt" || fail "preflight: no Allow-Origin"
got=$(curl -s -o "$work/body" -D "$work/cors.txt" -w "%{http_code}" "$url$C" -H "Origin: http://app.example" \
  -H "Authorization: Bearer filekey" -H "Content-Type: application/json" -d '{"prompt": "hi", "max_tokens": 1}')
[ "$got" = 200 ] && grep -qi '^Access-Control-Allow-Origin: http://app.example' "$work/cors.txt" ||
  fail "a --cors-origin POST: status $got, headers $(tr -d '\r' <"$work/cors.txt" | tr '\n' ' ')"
kill -TERM "$filekeyed_pid"
wait "$filekeyed_pid" || fail "filekeyed server exit code $?"
grep -q '"route"' "$work/filekeyed.err" && fail "--access-log off still logs: $(grep '"route"' "$work/filekeyed.err" | head -2)"
DSV4_API_KEY=envkey start_server envkeyed --model "$work/tiny" --max-context 256 --batch-size 2
envkeyed_pid=$pid
auth=envkey expect 200 - - GET /v1/models
expect 401 - invalid_api_key GET /v1/models
kill -TERM "$envkeyed_pid"
wait "$envkeyed_pid" || fail "envkeyed server exit code $?"
# Behind --trusted-proxies the per-client limit counts X-Forwarded-For's client, not the proxy.
start_server proxied --model "$work/tiny4k" --max-context 4096 --trusted-proxies 127.0.0.1 \
  --max-connections-per-client 1 --test-min-step-seconds 0.01
proxied_pid=$pid
curl -s -N --max-time 3 "$url$C" -H "Content-Type: application/json" -H "X-Forwarded-For: 10.0.0.1" \
  -d '{"prompt": "x", "max_tokens": 1000, "stream": true, "ignore_eos": true}' >/dev/null &
held=$!
sleep 1
[ "$(code_of "$url/health" -H "X-Forwarded-For: 10.0.0.1")" = 429 ] || fail "a second connection of 10.0.0.1 not 429"
[ "$(code_of "$url/health" -H "X-Forwarded-For: 10.0.0.2")" = 200 ] || fail "another forwarded client refused"
wait "$held"
kill -TERM "$proxied_pid"
wait "$proxied_pid" || fail "proxied server exit code $?"
# A key file that cannot be read, or whose first line is empty, stops the start with its name.
"$dsv4" serve --model "$work/tiny" --port 0 --api-key-file "$work/no_such_key" >"$work/nokey.out" 2>&1 &&
  fail "serve started with a missing --api-key-file"
grep -q -- "--api-key-file" "$work/nokey.out" || fail "missing key file: $(cat "$work/nokey.out")"
printf '# no key here\n\n' >"$work/empty_key"
"$dsv4" serve --model "$work/tiny" --port 0 --api-key-file "$work/empty_key" >"$work/emptykey.out" 2>&1 &&
  fail "serve started with a key file without keys"
grep -q "$work/empty_key: no key" "$work/emptykey.out" || fail "empty key file: $(cat "$work/emptykey.out")"
printf 'key-one\nkey two\n' >"$work/bad_key"
"$dsv4" serve --model "$work/tiny" --port 0 --api-key-file "$work/bad_key" >"$work/badkey.out" 2>&1 &&
  fail "serve started with a key holding a space"
grep -q "$work/bad_key:2: a key holds printable ASCII without spaces" "$work/badkey.out" ||
  fail "bad key line: $(cat "$work/badkey.out")"
printf 'key-one\n' >"$work/one_key"
"$dsv4" serve --model "$work/tiny" --port 0 --metrics-auth >"$work/metricsauth.out" 2>&1 &&
  fail "serve started with --metrics-auth and no key"
grep -q -- "--metrics-auth needs an API key" "$work/metricsauth.out" || fail "--metrics-auth alone: $(cat "$work/metricsauth.out")"

# Tenants: two keys in a file, each its own prefix-cache namespace (the default with several
# keys); /metrics behind a key; the scheme in any case; the bound address 127.0.0.2 as Host.
printf '# tenants\nkey-alpha\nkey-beta\n' >"$work/tenant_keys"
start_server tenants --model "$work/tiny" --host 127.0.0.2 --api-key-file "$work/tenant_keys" --metrics-auth \
  --max-context 256 --batch-size 2 --page-tokens 32 --prefix-blocks 16
tenants_pid=$pid
grep -q "2 API keys (tenants), prefix cache per key" "$work/tenants.out" || fail "tenants start-up: $(cat "$work/tenants.out")"
[ "$(code_of "$url/health")" = 200 ] || fail "Host = the bound address 127.0.0.2: $(code_of "$url/health")"
[ "$(code_of "$url/metrics")" = 401 ] || fail "/metrics without a key under --metrics-auth"
[ "$(code_of "$url/metrics" -H "Authorization: Bearer key-beta")" = 200 ] || fail "/metrics with a key"
[ "$(code_of "$url/v1/models" -H "Authorization: bearer key-alpha")" = 200 ] || fail "lower-case bearer scheme refused"
[ "$(code_of "$url/v1/models" -H "Authorization: Bearer key-gamma")" = 401 ] || fail "an unknown key accepted"
cached() {  # cached_tokens of a completion of $words by key $1 (extra JSON fields: $2)
  curl -s "$url$C" -H "Authorization: Bearer $1" -H "Content-Type: application/json" \
    -d "{\"prompt\": \"$words\", \"max_tokens\": 1${2-}}" | jq -r '.usage.prompt_tokens_details.cached_tokens'
}
words=$(printf 'word %.0s' $(seq 100))
[ "$(cached key-alpha)" = 0 ] || fail "a cold prompt has cached tokens"
[ "$(cached key-beta)" = 0 ] || fail "key-beta hit key-alpha's prefix cache"
a2=$(cached key-alpha)
[ "$a2" -ge 32 ] 2>/dev/null || fail "key-alpha's repeated prompt: cached_tokens $a2"
[ "$(cached key-alpha ', "cache_salt": "s1"')" = 0 ] || fail "another cache_salt hit the key's unsalted blocks"
s2=$(cached key-alpha ', "cache_salt": "s1"')
[ "$s2" -ge 32 ] 2>/dev/null || fail "the same cache_salt again: cached_tokens $s2"
[ "$(cached key-beta ', "cache_salt": "s1"')" = 0 ] || fail "key-beta with key-alpha's cache_salt hit its blocks"
auth=key-alpha expect 400 cache_salt '*' POST $C '{"prompt": "x", "max_tokens": 1, "cache_salt": ""}'
auth=key-alpha expect 400 cache_salt '*' POST $C '{"prompt": "x", "max_tokens": 1, "cache_salt": 7}'
grep -q "key-alpha\|key-beta" "$work/tenants.out" "$work/tenants.err" && fail "a key's text is in the server's output"
kill -TERM "$tenants_pid"
wait "$tenants_pid" || fail "tenants server exit code $?"
# A non-loopback bind without a key warns at start-up.
# With the prefix cache, a repeated prompt's usage counts its cached tokens.
start_server open --model "$work/tiny" --host 0.0.0.0 --max-context 256 --batch-size 2 --page-tokens 32 \
  --prefix-blocks 16
open_pid=$pid
grep -q "warning: 0.0.0.0 is not a loopback address and no API key is set" "$work/open.err" ||
  fail "no warning for a network bind without a key: $(cat "$work/open.err")"
words=$(printf 'word %.0s' $(seq 100))
for i in 1 2; do expect 200 - - POST $C "{\"prompt\": \"$words\", \"max_tokens\": 2}"; cp "$work/body" "$work/cached$i.json"; done
jq -e '.usage.prompt_tokens_details.cached_tokens == 0' "$work/cached1.json" >/dev/null ||
  fail "a cold prompt has cached tokens: $(cat "$work/cached1.json")"
jq -e '.usage.prompt_tokens_details.cached_tokens >= 32 and .usage.prompt_tokens_details.cached_tokens < .usage.prompt_tokens' \
  "$work/cached2.json" >/dev/null || fail "a repeated prompt has no cached tokens: $(cat "$work/cached2.json")"
kill -TERM "$open_pid"
wait "$open_pid" || fail "open server exit code $?"

[ "$fails" -eq 0 ] && echo "server_curl: all checks passed"
exit $((fails > 0))
