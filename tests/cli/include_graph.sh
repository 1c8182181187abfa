#!/usr/bin/env bash
# Dependencies run one way (shared/STYLE.md 1; issue 25): the include graph of the sources,
# followed through every header of the tree (quoted includes, resolved as the compiler does:
# the including file's folder, then src/, apps/, bench/; an include climbing with ../ fails).
#   1. The serving path includes no oracle: no file under src/ outside src/oracle/, in
#      apps/server/ or in apps/cli/ (but the commands that run oracles: logits, make-tiny,
#      bench) reaches a header of src/oracle/.
#   2. The protocol library includes no kernel: runtime/request.h and apps/server/protocol.*
#      reach no header of src/kernels/.
#   3. The CMake side of the same: only the oracle library itself, the CLI, the bench library
#      and the tests name dsv4_oracle; dsv4_protocol links no kernel, model or runtime library.
# A failure names the file and its include chain. Usage: include_graph.sh SOURCE_DIR
set -uo pipefail
root=$(cd "${1:?usage: include_graph.sh SOURCE_DIR}" && pwd)
cd "$root" || exit 2
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

mapfile -t files < <(find src apps bench -type f \( -name '*.h' -o -name '*.cc' \) | sort)
[ "${#files[@]}" -gt 0 ] || { echo "FAIL: no sources under $root"; exit 1; }

# includes[f]: the tree's files f includes directly (space-separated).
declare -A includes=()
resolved=""
resolve() {  # resolve <including file> <include name>: sets resolved to the tree file the compiler opens
  local cand
  resolved=""
  for cand in "${1%/*}/$2" "src/$2" "apps/$2" "bench/$2"; do
    if [ -f "$cand" ]; then resolved=$cand; return; fi
  done
}
while IFS= read -r line; do
  f=${line%%:*}
  name=${line#*\"}; name=${name%%\"*}
  [[ $name == *../* ]] && fail "$f includes \"$name\" (a ../ path the check does not follow)"
  resolve "$f" "$name"
  [ -n "$resolved" ] && includes[$f]+="$resolved "
done < <(grep -H '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "${files[@]}")

# reaches <source prefix> <start files...>: fails for each start file whose include closure
# holds a file under the prefix (the chain printed), by a fixed point of "includes a tainted file".
reaches() {
  local prefix=$1; shift
  declare -A via=()  # via[f]: the included file through which f reaches the prefix ("" for the prefix's own)
  local f g changed=1
  for f in "${files[@]}"; do [[ $f == "$prefix"* ]] && via[$f]=""; done
  while [ $changed -eq 1 ]; do
    changed=0
    for f in "${files[@]}"; do
      [ -n "${via[$f]+x}" ] && continue
      for g in ${includes[$f]:-}; do
        if [ -n "${via[$g]+x}" ]; then via[$f]=$g; changed=1; break; fi
      done
    done
  done
  for f in "$@"; do
    [ -n "${via[$f]+x}" ] || continue
    local chain=$f g=${via[$f]}
    while [ -n "$g" ]; do chain+=" -> $g"; g=${via[$g]}; done
    fail "$f reaches $prefix: $chain"
  done
}

# 1. The serving path: src/ but the oracles, the server, the CLI but its oracle commands.
serving=()
for f in "${files[@]}"; do
  case $f in
    src/oracle/*) ;;
    apps/cli/cmd_logits.cc | apps/cli/cmd_make_tiny.cc | apps/cli/cmd_bench.cc) ;;
    src/* | apps/server/* | apps/cli/*) serving+=("$f") ;;
  esac
done
[ "${#serving[@]}" -gt 50 ] || fail "only ${#serving[@]} serving-path files found (the layout changed?)"
reaches src/oracle/ "${serving[@]}"

# 2. The protocol library.
protocol=(src/runtime/request.h apps/server/protocol.h apps/server/parse_request.cc apps/server/build_response.cc apps/server/admission.cc)
for f in "${protocol[@]}"; do [ -f "$f" ] || fail "$f is missing (the layout changed?)"; done
reaches src/kernels/ "${protocol[@]}"

# 3. CMake: who links the oracles, what the protocol library links.
while IFS= read -r hit; do
  case ${hit%%:*} in
    src/oracle/CMakeLists.txt | apps/cli/CMakeLists.txt | bench/CMakeLists.txt | tests/CMakeLists.txt) ;;
    *) fail "${hit%%:*} names dsv4_oracle (only the CLI, the bench library and the tests link it): ${hit#*:}" ;;
  esac
done < <(grep -rn --include=CMakeLists.txt 'dsv4_oracle' src apps bench tests CMakeLists.txt 2>/dev/null)
links=$(awk '/target_link_libraries\(dsv4_protocol/ { on = 1 } on { print; if (/\)/) exit }' apps/server/CMakeLists.txt)
[ -n "$links" ] || fail "apps/server/CMakeLists.txt: no target_link_libraries(dsv4_protocol ...)"
if grep -Eq 'dsv4_(kernel|model|runtime|oracle)' <<<"$links"; then
  fail "dsv4_protocol links a kernel, model, runtime or oracle library: $links"
fi

if [ $fails -ne 0 ]; then echo "$fails include-graph violation(s)"; exit 1; fi
echo "include graph OK: ${#serving[@]} serving-path files reach no oracle; the protocol reaches no kernel"
