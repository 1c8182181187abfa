#!/usr/bin/env bash
# dsv4 chat on the built-in tiny model: multi-turn history, /reset, /exit, end of input, and
# Ctrl-C (SIGINT) stopping one answer while the session goes on.
# Usage: chat_cli.sh <dsv4 binary> <work dir>
set -uo pipefail
dsv4=$1
work=$2
rm -rf "$work" && mkdir -p "$work"
export XDG_CACHE_HOME="$work/cache"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

out=$(printf 'Hello there\n/reset\nHow are you?\nAnd then?\n/exit\nnever read\n' |
      timeout 120 "$dsv4" chat --max-tokens 6 --temperature 0 2>&1)
code=$?
[ "$code" -eq 0 ] || fail "chat exited $code: $out"
[ "$(grep -o '(max tokens)' <<<"$out" | wc -l)" -eq 3 ] || fail "expected 3 answers: $out"
grep -q '(history cleared)' <<<"$out" || fail "no /reset acknowledgement: $out"

# End of input ends the session; thinking mode shows reasoning in brackets.
out=$(printf 'Hi\n' | timeout 120 "$dsv4" chat --max-tokens 6 --thinking 2>&1)
[ $? -eq 0 ] || fail "chat --thinking exited non-zero: $out"
grep -q '\[' <<<"$out" || fail "no reasoning block in thinking mode: $out"

# Ctrl-C during a long answer: the answer stops, the session takes the next line.
fifo="$work/in"
mkfifo "$fifo"
timeout 300 "$dsv4" chat --max-tokens 100000 --temperature 0.8 <"$fifo" >"$work/ctrlc.txt" 2>&1 &
pid=$!
exec 3>"$fifo"
echo "Tell me a long story" >&3
banner=$(wc -c <"$work/ctrlc.txt")
for _ in $(seq 1 200); do  # wait until the answer streams
  [ "$(wc -c <"$work/ctrlc.txt")" -gt $((banner + 40)) ] && break
  sleep 0.05
done
kill -INT "$pid"
sleep 0.5
echo "Short one" >&3
echo "/exit" >&3
exec 3>&-
wait "$pid"
code=$?
[ "$code" -eq 0 ] || fail "chat after Ctrl-C exited $code: $(cat "$work/ctrlc.txt")"
grep -q '\[stopped\]' "$work/ctrlc.txt" || fail "Ctrl-C did not stop the answer: $(cat "$work/ctrlc.txt")"
[ "$(grep -ao '^> ' "$work/ctrlc.txt" | wc -l)" -ge 3 ] || fail "the session did not go on after Ctrl-C"

[ "$failures" -eq 0 ] && echo "chat_cli: all checks passed"
exit $((failures > 0))
