#!/usr/bin/env bash
# dsv4 chat on a random tiny model (make-tiny): multi-turn history, /reset, /exit, end of input, and
# Ctrl-C (SIGINT) stopping one answer while the session goes on.
# Usage: chat_cli.sh <dsv4 binary> <work dir>
set -uo pipefail
dsv4=$1
work=$2
rm -rf "$work" && mkdir -p "$work"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
"$dsv4" make-tiny --out "$work/tiny" >/dev/null || { echo "FAIL: make-tiny"; exit 1; }

out=$(printf 'Hello there\n/reset\nHow are you?\nAnd then?\n/exit\nnever read\n' |
      timeout 120 "$dsv4" chat --model "$work/tiny" --max-tokens 6 --temperature 0 2>&1)
code=$?
[ "$code" -eq 0 ] || fail "chat exited $code: $out"
[ "$(grep -ao '(max tokens)' <<<"$out" | wc -l)" -eq 3 ] || fail "expected 3 answers: $out"
grep -aq '(history cleared)' <<<"$out" || fail "no /reset acknowledgement: $out"

# End of input ends the session; thinking mode shows reasoning in brackets.
out=$(printf 'Hi\n' | timeout 120 "$dsv4" chat --model "$work/tiny" --max-tokens 6 --thinking 2>&1)
[ $? -eq 0 ] || fail "chat --thinking exited non-zero: $out"
grep -aq '\[' <<<"$out" || fail "no reasoning block in thinking mode: $out"

# Ctrl-C during a long answer: the answer stops, the session takes the next line. Each step
# lasts at least 5 ms (test hook): an answer to the context end takes >= 5 s, so it is still
# running when Ctrl-C comes on a machine of any speed. (An answer can end by itself first, at
# EOS: then the next seed.)
ctrl_c_run() {  # ctrl_c_run SEED: 0 when the answer was stopped
  local fifo="$work/in" pid start
  rm -f "$fifo" && mkfifo "$fifo"
  : >"$work/ctrlc.txt"
  timeout 300 "$dsv4" chat --model "$work/tiny" --max-tokens 100000 --temperature 0.8 --seed "$1" \
    --test-min-step-seconds 0.005 >"$work/ctrlc.txt" 2>&1 <"$fifo" &
  pid=$!
  exec 3>"$fifo"
  echo "Tell me a long story" >&3
  for _ in $(seq 1 600); do  # the prompt is up: the answer starts after it
    [ "$(grep -ac '^> ' "$work/ctrlc.txt")" -ge 1 ] && break
    sleep 0.05
  done
  start=$(wc -c <"$work/ctrlc.txt")
  for _ in $(seq 1 200); do  # wait until the answer streams
    [ "$(wc -c <"$work/ctrlc.txt")" -gt $((start + 40)) ] && break
    sleep 0.05
  done
  kill -INT "$pid"
  sleep 0.5
  echo "Short one" >&3
  echo "/exit" >&3
  exec 3>&-
  wait "$pid"
  local code=$?
  [ "$code" -eq 0 ] || { fail "chat after Ctrl-C exited $code: $(cat "$work/ctrlc.txt")"; return 0; }
  [ "$(grep -ac '^> ' "$work/ctrlc.txt")" -ge 3 ] || { fail "the session did not go on after Ctrl-C"; return 0; }
  grep -aq '\[stopped\]' "$work/ctrlc.txt"
}
stopped=0
for seed in 1 2 3 4 5 6; do
  ctrl_c_run "$seed" && { stopped=1; break; }
done
[ "$stopped" -eq 1 ] || fail "Ctrl-C did not stop an answer in 6 tries: $(cat "$work/ctrlc.txt")"

[ "$failures" -eq 0 ] && echo "chat_cli: all checks passed"
exit $((failures > 0))
