#!/usr/bin/env bash
# dsv4 generate on the built-in model (models/kjv-9m, no --model), as scripts/demo.sh runs it.
#   words: a greedy continuation of a KJV-style prompt is mostly dictionary words (Debian
#          wamerican's /usr/share/dict/words, case-insensitive, plus a short list of archaic
#          KJV forms): at least 70 % of its alphabetic words. Not a fixed string.
#   mtp:   the same tokens with and without --mtp, greedy and seeded sampling at temperature
#          0.8, three prompts in batches of 2; the acceptance rate is printed, not asserted.
#   dspark: the same with models/kjv-9m-dspark and --spec dspark (gamma 5, and 2 for the
#          sampled run): the same tokens as plain decoding; acceptance by position printed.
# Usage: demo_cli.sh words|mtp|dspark <dsv4 binary> <work dir>
set -uo pipefail
mode=$1 dsv4=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
unset DSV4_MODEL  # the built-in model, not a user's override
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

case "$mode" in
words)
  dict=/usr/share/dict/words
  [ -r "$dict" ] || { echo "FAIL: $dict missing (Debian wamerican: scripts/setup.sh installs it)"; exit 1; }
  "$dsv4" generate --prompt "In the beginning God created" --prompt "And the LORD said unto Moses," \
    --max-tokens 40 --temperature 0 --verbose --quiet-steps >"$work/out.txt" 2>&1 || { cat "$work/out.txt"; exit 1; }
  cat "$work/out.txt"
  python3 - "$work/out.txt" "$dict" <<'PY' || fails=$((fails + 1))
import json, re, sys
out, dict_path = sys.argv[1], sys.argv[2]
words = {w.strip().lower() for w in open(dict_path, encoding="utf-8", errors="replace")}
# Archaic forms of the KJV that a modern word list lacks.
words |= {"unto", "thee", "thou", "thy", "thine", "ye", "hath", "hast", "doth", "dost", "saith",
          "spake", "shalt", "wilt", "art", "begat", "cometh", "goeth", "giveth", "maketh",
          "taketh", "sayest", "knoweth", "loveth", "seeth", "heareth", "abideth", "believeth",
          "wherefore", "whither", "thereof", "therein", "thereon", "wherein", "whereof", "lo",
          "yea", "nay", "shew", "shewed", "brethren", "sware", "bare", "gat", "wist", "twain"}
texts = [json.loads(l.split(" text: ", 1)[1]) for l in open(out, encoding="utf-8")
         if re.match(r"request \d+ text: ", l)]
found = [w.lower() for t in texts for w in re.findall(r"[A-Za-z]+", t)]
known = [w for w in found if w in words]
share = len(known) / max(1, len(found))
unknown = sorted({w for w in found if w not in words})
print(f"demo words: {len(known)}/{len(found)} = {share:.0%} in the word list; not in it: {unknown}")
if len(texts) != 2 or len(found) < 20 or share < 0.70:
    print("FAIL: expected two texts of at least 20 words in all, >= 70 % dictionary words")
    sys.exit(1)
PY
  ;;
mtp)
  prompts=(--prompt "In the beginning" --prompt "Blessed are the" --prompt "And it came to pass, when")
  for sampling in "--temperature 0" "--temperature 0.8 --seed 7"; do
    for m in plain mtp; do
      extra=(); [ "$m" = mtp ] && extra=(--mtp)
      # shellcheck disable=SC2086
      "$dsv4" generate "${prompts[@]}" --max-tokens 40 --batch-size 2 --verbose --quiet-steps $sampling "${extra[@]}" \
        >"$work/$m.txt" 2>&1 || fail "generate $sampling ${extra[*]}: $(cat "$work/$m.txt")"
      grep '^request' "$work/$m.txt" >"$work/$m.req"
    done
    [ "$(grep -c '^request [0-9]* (' "$work/plain.req")" -eq 3 ] || fail "$sampling: not 3 requests: $(cat "$work/plain.txt")"
    cmp -s "$work/plain.req" "$work/mtp.req" ||
      { fail "$sampling: outputs differ with --mtp"; diff "$work/plain.req" "$work/mtp.req"; }
    rate=$(grep -o 'MTP acceptance [0-9/]* = [0-9.]*' "$work/mtp.txt")
    [ -n "$rate" ] || fail "$sampling --mtp: no acceptance rate printed"
    echo "$sampling: identical with --mtp; $rate"
    grep '^request 0 text' "$work/mtp.txt"
  done
  ;;
dspark)
  model=(--model "$(cd "$(dirname "$0")/../.." && pwd)/models/kjv-9m-dspark")
  prompts=(--prompt "In the beginning" --prompt "Blessed are the" --prompt "And it came to pass, when")
  for sampling in "--temperature 0" "--temperature 0.8 --seed 7 --gamma 2"; do
    for m in plain dspark; do
      extra=(); [ "$m" = dspark ] && extra=(--spec dspark)
      run=$sampling; [ "$m" = plain ] && run=${sampling/ --gamma 2/}
      # shellcheck disable=SC2086
      "$dsv4" generate "${model[@]}" "${prompts[@]}" --max-tokens 40 --batch-size 2 --verbose --quiet-steps $run "${extra[@]}" \
        >"$work/$m.txt" 2>&1 || fail "generate $run ${extra[*]}: $(cat "$work/$m.txt")"
      grep '^request' "$work/$m.txt" >"$work/$m.req"
    done
    [ "$(grep -c '^request [0-9]* (' "$work/plain.req")" -eq 3 ] || fail "$sampling: not 3 requests: $(cat "$work/plain.txt")"
    cmp -s "$work/plain.req" "$work/dspark.req" ||
      { fail "$sampling: outputs differ with --spec dspark"; diff "$work/plain.req" "$work/dspark.req"; }
    rate=$(grep -o 'DSpark: .*\]' "$work/dspark.txt")
    [ -n "$rate" ] || fail "$sampling --spec dspark: no acceptance printed"
    echo "$sampling: identical with --spec dspark; $rate"
    grep '^request 0 text' "$work/dspark.txt"
  done
  ;;
*) echo "usage: demo_cli.sh words|mtp|dspark DSV4 WORKDIR"; exit 2 ;;
esac
[ "$fails" -eq 0 ] && echo "demo_cli $mode: all checks passed"
exit $((fails > 0))
