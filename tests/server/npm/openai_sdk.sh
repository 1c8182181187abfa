#!/usr/bin/env bash
# The official OpenAI Node SDK (npm package openai, pinned; test-time only) against dsv4 serve:
# installs it into CACHE_DIR with the image's npm, then runs openai_sdk.mjs (completions and
# chat, streaming and not; 32 concurrent streams equal to offline dsv4 generate; a bounded load
# run with no lost or duplicated responses and flat server memory).
# Exit 77 (ctest SKIP) only when the npm registry is unreachable.
# Usage: openai_sdk.sh DSV4 CACHE_DIR WORKDIR
set -uo pipefail
dsv4=$(realpath "$1") cache=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$cache" && cache=$(cd "$cache" && pwd)
pins=("openai@6.49.0")
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
rm -rf "$work" && mkdir -p "$work" && work=$(cd "$work" && pwd)
export XDG_CACHE_HOME="$work/cache"
exec node "$here/openai_sdk.mjs" "$dsv4" "$cache" "$work"
