#!/usr/bin/env bash
# End-to-end smoke test of the dsv4 command: every command on a fresh tiny
# checkpoint, and bad input that must end with a clear message and exit code 1
# (never a crash). Usage: cli_smoke.sh /path/to/dsv4 WORKDIR
set -uo pipefail
dsv4=$1
work=$2
unset DSV4_MODEL  # the built-in model where no --model is given
rm -rf "$work" && mkdir -p "$work"
fails=0
ok() {  # ok <description> <command...>: must exit 0
  local what=$1; shift
  if ! "$@" >"$work/out.txt" 2>&1; then echo "FAIL (exit $?): $what"; cat "$work/out.txt"; fails=$((fails + 1)); fi
}
bad() {  # bad <description> <expected message part> <command...>: must exit 1 with the message
  local what=$1 msg=$2; shift 2
  "$@" >"$work/out.txt" 2>&1
  local code=$?
  if [ "$code" -ne 1 ] || ! grep -qF -- "$msg" "$work/out.txt"; then
    echo "FAIL (exit $code): $what: expected '$msg'"; cat "$work/out.txt"; fails=$((fails + 1))
  fi
}

ok "make-tiny tiny2 none" "$dsv4" make-tiny --out "$work/t2" --preset tiny2 --quant none --seed 3
ok "inspect" "$dsv4" inspect --model "$work/t2"
ok "inspect placement" "$dsv4" inspect --model "$work/t2" --tp 2 --ep 4
grep -q "rank 3: " "$work/out.txt" || { echo "FAIL: inspect --tp 2 --ep 4 printed no rank 3"; fails=$((fails + 1)); }
bad "inspect bad tp" "--tp 3 does not divide o_groups" "$dsv4" inspect --model "$work/t2" --tp 3
grep -q "result: OK" "$work/out.txt" || { echo "FAIL: inspect did not report OK"; fails=$((fails + 1)); }
# Deployment on paper: Flash on 8 ranks (2 DP groups of tp 4, experts over all 8), a checkpoint's config.
ok "plan flash" "$dsv4" plan --preset flash --tp 4 --ep 8 --dp 2 --hosts 2 --mem-per-host 256
grep -q "^ranks 0-7: 4 requests, 4 rows" "$work/out.txt" && grep -q "^hosts 0-1, each: .*: fits;" "$work/out.txt" &&
  grep -q "^    64 " "$work/out.txt" ||
  { echo "FAIL: plan printed no folded ranks 0-7, hosts 0-1 that fit or B = 64"; cat "$work/out.txt"; fails=$((fails + 1)); }
bad "plan bad tp" "--tp 3 does not divide o_groups = 8" "$dsv4" plan --preset flash --tp 3
bad "plan hosts" "--hosts 3 must divide the world of 8 ranks" "$dsv4" plan --preset flash --tp 8 --hosts 3
bad "plan bench" "--bench $work/none.json: cannot open" "$dsv4" plan --preset flash --bench "$work/none.json"
bad "plan context" "exceeds the model's max_position_embeddings" "$dsv4" plan --model "$work/t2" --context 5000
bad "plan model and preset" "exactly one of --model DIR and --preset NAME" "$dsv4" plan --tp 2
ok "plan model mtp" "$dsv4" plan --model "$work/t2" --tp 2 --ep 4 --batch 3 --context 512 --mtp
grep -q "^ranks 1, 3: 2 requests, 4 rows" "$work/out.txt" ||
  { echo "FAIL: plan --batch 3 over tp 2 gave no rank with 2 requests"; cat "$work/out.txt"; fails=$((fails + 1)); }
ok "inspect built-in" "$dsv4" inspect
grep -q "models/kjv-9m" "$work/out.txt" || { echo "FAIL: inspect without --model did not use models/kjv-9m"; fails=$((fails + 1)); }
# $DSV4_MODEL replaces the built-in model; a missing directory is named.
DSV4_MODEL="$work/t2" "$dsv4" inspect >"$work/out.txt" 2>&1
grep -q "$work/t2" "$work/out.txt" || { echo "FAIL: DSV4_MODEL was not used"; cat "$work/out.txt"; fails=$((fails + 1)); }
bad "DSV4_MODEL missing" "$work/no_model" env DSV4_MODEL="$work/no_model" "$dsv4" inspect
ok "logits" "$dsv4" logits --model "$work/t2" --tokens 1,2,3,4,5 --out "$work/l.npy" --decisions-out "$work/d.json"
[ -s "$work/l.npy" ] && [ -s "$work/d.json" ] || { echo "FAIL: logits wrote no files"; fails=$((fails + 1)); }
# Decision replay: forcing the dumped decisions changes nothing, and the Level-A reference
# with them forced gives the engine's logits bit for bit.
ok "logits replay" "$dsv4" logits --model "$work/t2" --tokens 1,2,3,4,5 --out "$work/r.npy" --decisions-in "$work/d.json"
cmp -s "$work/l.npy" "$work/r.npy" || { echo "FAIL: replayed logits differ"; fails=$((fails + 1)); }
ok "logits reference" "$dsv4" logits --model "$work/t2" --tokens 1,2,3,4,5 --out "$work/f.npy" --numerics reference \
  --decisions-in "$work/d.json"
cmp -s "$work/l.npy" "$work/f.npy" || { echo "FAIL: reference logits differ from the engine's"; fails=$((fails + 1)); }
sed '0,/"layer": 0/s//"layer": 9/' "$work/d.json" >"$work/bad_layer.json"
bad "decision layer out of range" "layer 9 outside [0, 4)" "$dsv4" logits --model "$work/t2" --tokens 1,2 \
  --out "$work/e.npy" --decisions-in "$work/bad_layer.json"
echo '{"decisions": [{"block": "main", "kind": "moe", "layer": 2, "pos": 0, "selected": [1]}]}' >"$work/bad_count.json"
bad "decision id count" "1 ids selected, num_experts_per_tok = 2" "$dsv4" logits --model "$work/t2" --tokens 1,2 \
  --out "$work/e.npy" --decisions-in "$work/bad_count.json"
echo '{"decisions": [' >"$work/bad_json.json"
bad "decision file not JSON" "not valid JSON" "$dsv4" logits --model "$work/t2" --tokens 1,2 --out "$work/e.npy" \
  --decisions-in "$work/bad_json.json"
bad "missing decision file" "nothing_here.json" "$dsv4" logits --model "$work/t2" --tokens 1,2 --out "$work/e.npy" \
  --decisions-in "$work/nothing_here.json"
ok "logits mtp float" "$dsv4" logits --model "$work/t2" --tokens 1,2,3,4,5 --out "$work/m.npy" --mtp --numerics float
ok "generate" "$dsv4" generate --model "$work/t2" --max-tokens 4 --batch-size 2 --mtp --verbose --quiet-steps \
  --prompt-ids 1,2,3 --prompt-ids 4
grep -q "tokens/s" "$work/out.txt" || { echo "FAIL: generate printed no rate"; fails=$((fails + 1)); }

# Prefix cache: two prompts sharing 300 tokens, one at a time, give the tokens of a run without it.
python3 -c "print(' '.join(str((i * 37) % 500) for i in range(300)))" >"$work/system.txt"
sys_ids=$(tr ' ' ',' <"$work/system.txt")
ok "generate without prefix cache" "$dsv4" generate --model "$work/t2" --max-tokens 4 --verbose --quiet-steps --batch-size 1 \
  --prompt-ids "$sys_ids,1,2" --prompt-ids "$sys_ids,3,4,5"
grep '^request' "$work/out.txt" >"$work/gen_cold.txt"
ok "generate with prefix cache" "$dsv4" generate --model "$work/t2" --max-tokens 4 --verbose --quiet-steps --batch-size 1 \
  --prompt-ids "$sys_ids,1,2" --prompt-ids "$sys_ids,3,4,5" --prefix-blocks 8 --page-tokens 128
grep '^request' "$work/out.txt" >"$work/gen_hit.txt"
grep -q "prefix cache: 252 prompt positions reused" "$work/out.txt" ||
  { echo "FAIL: no prefix-cache hit reported"; fails=$((fails + 1)); }
cmp -s "$work/gen_cold.txt" "$work/gen_hit.txt" || { echo "FAIL: prefix-cache hit changed tokens"; fails=$((fails + 1)); }
# Speculative-decoding flags that contradict each other or the checkpoint, each named.
bad "verify without dspark" "--verify rejection needs --spec dspark" "$dsv4" generate --model "$work/t2" \
  --prompt-ids 1,2 --max-tokens 2 --verify rejection
bad "gamma without dspark" "--gamma needs --spec dspark" "$dsv4" generate --model "$work/t2" --prompt-ids 1,2 \
  --max-tokens 2 --gamma 3
bad "dspark without a drafter" "has no DSpark drafter" "$dsv4" generate --model "$work/t2" --prompt-ids 1,2 \
  --max-tokens 2 --spec dspark
bad "page tokens not a multiple of the ratios" "page_tokens = 100 must be a multiple of every compress ratio" \
  "$dsv4" generate --model "$work/t2" --page-tokens 100 --max-tokens 2
bad "limits beyond the machine" "of this machine's" \
  "$dsv4" generate --model "$work/t2" --batch-size 200000000 --max-tokens 2
bad "max-context above the model" "exceeds the model's max_position_embeddings" \
  "$dsv4" generate --model "$work/t2" --max-context 100000000000 --max-tokens 2

# Token lists from @FILE: ids separated by commas and/or whitespace give the inline list's output.
printf '1, 2\n3\t4 \n  5,\n' >"$work/ids.txt"
ok "logits --tokens @FILE" "$dsv4" logits --model "$work/t2" --tokens "@$work/ids.txt" --out "$work/a.npy"
cmp -s "$work/l.npy" "$work/a.npy" || { echo "FAIL: --tokens @FILE logits differ from inline"; fails=$((fails + 1)); }
printf '1\n2\n3\n' >"$work/prompt.txt"
# Whole-output constraints: the text between the request line and the rate is in the language.
ok "generate --regex" "$dsv4" generate --model "$work/t2" --max-tokens 16 --temperature 0.9 --prompt hi --regex '[0-9]{2}-[a-z]{2}'
grep -qxE '[0-9]{2}-[a-z]{2}' "$work/out.txt" || { echo "FAIL: --regex output"; cat "$work/out.txt"; fails=$((fails + 1)); }
printf 'root ::= w (" " w)? "."  # words\nw ::= [a-z]{1,3}\n' >"$work/g.gbnf"
ok "generate --grammar" "$dsv4" generate --model "$work/t2" --max-tokens 16 --prompt hi --grammar "$work/g.gbnf"
grep -qxE '[a-z]{1,3}( [a-z]{1,3})?[.]' "$work/out.txt" || { echo "FAIL: --grammar output"; cat "$work/out.txt"; fails=$((fails + 1)); }
printf 'root ::= "(" root ")"\n' >"$work/r.gbnf"
bad "recursive grammar" "--grammar: line 1 column 14: rule 'root' is recursive" "$dsv4" generate --model "$work/t2" \
  --prompt hi --grammar "$work/r.gbnf"
# A format no validator knows is an annotation under strict too: generate names it on stderr.
printf '{"type":"string","format":"x-color","maxLength":4}' >"$work/fmt.json"
ok "generate --json-schema, unknown format" "$dsv4" generate --model "$work/t2" --max-tokens 8 --prompt hi \
  --json-schema "$work/fmt.json"
grep -qF 'dsv4: --json-schema ignores /: format "x-color" (unknown: an annotation)' "$work/out.txt" ||
  { echo "FAIL: strict generate did not name the unknown format"; cat "$work/out.txt"; fails=$((fails + 1)); }
bad "two constraints" "give one of them" "$dsv4" generate --model "$work/t2" --prompt hi --regex a --json
ok "generate inline" "$dsv4" generate --model "$work/t2" --max-tokens 4 --verbose --quiet-steps --prompt-ids 1,2,3 --prompt-ids 4
grep '^request' "$work/out.txt" >"$work/gen_inline.txt"
ok "generate --prompt-ids @FILE" "$dsv4" generate --model "$work/t2" --max-tokens 4 --verbose --quiet-steps \
  --prompt-ids "@$work/prompt.txt" --prompt-ids 4
grep '^request' "$work/out.txt" >"$work/gen_file.txt"
[ -s "$work/gen_inline.txt" ] && cmp -s "$work/gen_inline.txt" "$work/gen_file.txt" ||
  { echo "FAIL: --prompt-ids @FILE output differs from inline"; fails=$((fails + 1)); }
bad "missing token file" "--tokens: $work/no_ids.txt: cannot open" "$dsv4" logits --model "$work/t2" \
  --tokens "@$work/no_ids.txt" --out "$work/e.npy"
bad "token file is a directory" "not a regular file" "$dsv4" logits --model "$work/t2" --tokens "@$work" \
  --out "$work/e.npy"
bad "no file name after @" "--tokens @: no file name" "$dsv4" logits --model "$work/t2" --tokens @ --out "$work/e.npy"
printf ' \n\t\n' >"$work/ids_empty.txt"
bad "empty token file" "--tokens @$work/ids_empty.txt: the file holds no token ids" "$dsv4" logits \
  --model "$work/t2" --tokens "@$work/ids_empty.txt" --out "$work/e.npy"
printf '1 2\n3\n12x 5\n' >"$work/ids_text.txt"
bad "non-integer in token file" "--tokens @$work/ids_text.txt: token list item 3 '12x' is not a non-negative" \
  "$dsv4" logits --model "$work/t2" --tokens "@$work/ids_text.txt" --out "$work/e.npy"
printf '1,-4\n' >"$work/ids_neg.txt"
bad "negative token in file" "item 1 '-4' is not a non-negative decimal integer" "$dsv4" generate \
  --model "$work/t2" --prompt-ids "@$work/ids_neg.txt"
printf '7\n2147483648\n' >"$work/ids_big.txt"
bad "token above int32 in file" "--prompt-ids @$work/ids_big.txt: token list item 1 '2147483648' exceeds" \
  "$dsv4" generate --model "$work/t2" --prompt-ids "@$work/ids_big.txt"
printf '1,\n,2\n' >"$work/ids_gap.txt"
bad "empty item in token file" "item 1 is empty" "$dsv4" logits --model "$work/t2" --tokens "@$work/ids_gap.txt" \
  --out "$work/e.npy"

# make-tiny --max-position: a long-context config, same tensors; bad values get the config's errors.
ok "make-tiny --max-position" "$dsv4" make-tiny --out "$work/long" --preset tiny2 --quant none --seed 3 \
  --max-position 1048576
ok "inspect long" "$dsv4" inspect --model "$work/long"
grep -q "max_position_embeddings 1048576" "$work/out.txt" && grep -q "result: OK" "$work/out.txt" ||
  { echo "FAIL: inspect does not show max_position_embeddings 1048576"; fails=$((fails + 1)); }
grep -q '"max_position_embeddings": 1048576' "$work/long/config.json" ||
  { echo "FAIL: config.json lacks max_position_embeddings 1048576"; fails=$((fails + 1)); }
ok "logits on the long model" "$dsv4" logits --model "$work/long" --tokens "@$work/ids.txt" --out "$work/g.npy"
cmp -s "$work/l.npy" "$work/g.npy" || { echo "FAIL: --max-position changed the logits"; fails=$((fails + 1)); }
bad "zero max-position" \
  "--max-position 0: preset tiny: invalid config: field 'max_position_embeddings' = 0 must be positive" \
  "$dsv4" make-tiny --out "$work/x" --max-position 0
bad "negative max-position" "field 'max_position_embeddings' = -5 must be positive" \
  "$dsv4" make-tiny --out "$work/x" --max-position=-5
bad "huge max-position" "= 1099511627777 exceeds the supported maximum" \
  "$dsv4" make-tiny --out "$work/x" --max-position 1099511627777
bad "non-integer max-position" "--max-position: \"1e6\" is not a decimal integer" \
  "$dsv4" make-tiny --out "$work/x" --max-position 1e6
[ ! -e "$work/x" ] || { echo "FAIL: a rejected make-tiny wrote $work/x"; fails=$((fails + 1)); }

bad "unknown preset" "tiny3" "$dsv4" make-tiny --out "$work/x" --preset tiny3
bad "missing model dir" "nonexistent" "$dsv4" inspect --model "$work/nonexistent"
bad "empty token item" "item 1 is empty" "$dsv4" logits --model "$work/t2" --tokens 1,,2 --out "$work/e.npy"
bad "out-of-vocab token" "outside the vocabulary" "$dsv4" logits --model "$work/t2" --tokens 1,512 --out "$work/e.npy"
bad "bad isa" "isa 'bogus' unknown" "$dsv4" generate --model "$work/t2" --isa bogus
bad "bad temperature" "temperature" "$dsv4" generate --model "$work/t2" --temperature -1 --max-tokens 2
bad "bad top-p" "top_p" "$dsv4" generate --model "$work/t2" --top-p 1.5 --max-tokens 2
bad "bad top-k" "top_k" "$dsv4" generate --model "$work/t2" --top-k -1 --max-tokens 2
bad "bad min-p" "min_p" "$dsv4" generate --model "$work/t2" --min-p 1.5 --max-tokens 2
bad "bad presence penalty" "presence_penalty" "$dsv4" generate --model "$work/t2" --presence-penalty 2.5 --max-tokens 2
bad "bad logit bias" "--logit-bias" "$dsv4" generate --model "$work/t2" --logit-bias 5 --max-tokens 2
bad "logit bias id" "outside the vocabulary" "$dsv4" chat --model "$work/t2" --logit-bias 999999=1
bad "zero batch" "--batch-size = 0" "$dsv4" generate --model "$work/t2" --batch-size 0
bad "unknown flag" "--bogus" "$dsv4" generate --bogus
# A corrupt checkpoint: truncated safetensors file.
cp -r "$work/t2" "$work/broken"
truncate -s 1000 "$work/broken/model.safetensors"
bad "truncated checkpoint" "model.safetensors" "$dsv4" generate --model "$work/broken" --max-tokens 2

# generate --prompt: text through the checkpoint's tokenizer, the output printed as text too.
ok "generate --prompt" "$dsv4" generate --model "$work/t2" --prompt 'Hello, world' --max-tokens 3 --verbose --quiet-steps
grep -q '^request 0 text: "' "$work/out.txt" || { echo "FAIL: generate --prompt printed no text"; fails=$((fails + 1)); }
# By default generate prints the text alone: a header per request, no step lines, no ids.
ok "generate --prompt, text only" "$dsv4" generate --model "$work/t2" --prompt 'Hello, world' --max-tokens 3
grep -qx 'request 0 ([a-z]*), prompt "Hello, world":' "$work/out.txt" && ! grep -q '^step \|-> \[\|^model ' "$work/out.txt" ||
  { echo "FAIL: generate's default output:"; cat "$work/out.txt"; fails=$((fails + 1)); }
grep -q "tokens/s" "$work/out.txt" || { echo "FAIL: generate printed no rate by default"; fails=$((fails + 1)); }
ok "generate --verbose" "$dsv4" generate --model "$work/t2" --prompt 'Hello, world' --max-tokens 3 --verbose
grep -q '^step ' "$work/out.txt" || { echo "FAIL: generate --verbose printed no step lines"; fails=$((fails + 1)); }
"$dsv4" tokenize --model "$work/t2" --text 'Hello, world' >"$work/ids.txt" 2>&1
grep -qF "prompt [$(cat "$work/ids.txt")]" "$work/out.txt" ||
  { echo "FAIL: generate --prompt ids differ from tokenize's"; cat "$work/out.txt" "$work/ids.txt"; fails=$((fails + 1)); }

# tokenize: the tiny tokenizer written beside the checkpoint (text.md §5).
ok "tokenize special" "$dsv4" tokenize --model "$work/t2" --text 'x<think>y' --special
[ "$(cat "$work/out.txt")" = "90,502,91" ] || { echo "FAIL: tokenize --special printed $(cat "$work/out.txt")"; fails=$((fails + 1)); }
ok "tokenize plain" "$dsv4" tokenize --model "$work/t2" --text 'x<think>y'
grep -q 502 "$work/out.txt" && { echo "FAIL: tokenize without --special matched <think>"; fails=$((fails + 1)); }
ids=$(cat "$work/out.txt")
ok "tokenize decode" "$dsv4" tokenize --tokenizer "$work/t2/tokenizer.json" --decode "$ids"
[ "$(cat "$work/out.txt")" = 'x<think>y' ] || { echo "FAIL: decode gave $(cat "$work/out.txt")"; fails=$((fails + 1)); }
printf 'caf\xc3\xa9 \xff 你好\n' >"$work/text.bin"
ok "tokenize file" "$dsv4" tokenize --model "$work/t2" --file "$work/text.bin"
ok "tokenize decode file" "$dsv4" tokenize --model "$work/t2" --decode "$(cat "$work/out.txt")"
[ "$(cat "$work/out.txt")" = "$(printf 'caf\xc3\xa9 \xef\xbf\xbd 你好')" ] || { echo "FAIL: file round trip gave $(cat "$work/out.txt")"; fails=$((fails + 1)); }
bad "tokenize bad id" "outside the vocabulary" "$dsv4" tokenize --model "$work/t2" --decode 1,512
bad "tokenize no input" "give one of --text, --file, --decode" "$dsv4" tokenize --model "$work/t2"
bad "tokenize missing tokenizer" "nonexistent.json" "$dsv4" tokenize --tokenizer "$work/nonexistent.json" --text a
echo '{"model": {"type": "Unigram"}}' >"$work/bad_tok.json"
bad "tokenize unsupported" "decoder: missing" "$dsv4" tokenize --tokenizer "$work/bad_tok.json" --text a

if [ "$fails" -ne 0 ]; then echo "cli_smoke: $fails failure(s)"; exit 1; fi
echo "cli_smoke: all checks passed"
