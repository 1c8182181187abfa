#!/usr/bin/env bash
# The chat page (apps/server/web/chat.html) in headless Chromium, driven by playwright-core
# (chat_page.mjs). Debian's chromium is installed with apt-get when missing (root only) and
# playwright-core (pinned) with the image's npm into CACHE_DIR; both are test-time only.
#   real: starts `DSV4 serve --model M --port P` on a random tiny model (make-tiny) and drives it;
#   mock: serves PAGE with mock_server.mjs (exact texts, reasoning, a slow stream).
# Exit 77 (ctest SKIP) only when the npm registry or the apt mirror is unreachable, or (real)
# while this build's dsv4 has no `serve` command. The screenshot goes to OUT_DIR/chat_page.png.
# Usage: web_chat.sh real DSV4 CACHE_DIR OUT_DIR | web_chat.sh mock PAGE CACHE_DIR OUT_DIR
set -uo pipefail
mode=$1 target=$2 cache=$3 out=$4
here=$(cd "$(dirname "$0")" && pwd)
chromium=${CHROMIUM:-/usr/bin/chromium}
pins=("playwright-core@1.65.1")
offline='ENOTFOUND|ECONNREFUSED|ETIMEDOUT|EAI_AGAIN|ECONNRESET|ENETUNREACH|network|Could not resolve|Temporary failure|Failed to fetch|Unable to fetch|Unable to locate package'
mkdir -p "$cache" "$out"
rm -f "$out"/chat_page*.png  # no stale screenshot after a skip

# (CLI11 answers --help with the top-level usage when `serve` is not a subcommand.)
# The help is read whole first: grep -q would close the pipe early (SIGPIPE under pipefail).
if [ "$mode" = real ] && ! grep -q -- '--port' <<<"$("$target" serve --help 2>&1)"; then
  echo "$target has no 'serve' command yet: skipping"; exit 77
fi

(
  flock 9
  if [ ! -x "$chromium" ]; then
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
      echo "$chromium is missing and cannot be installed here (needs root and apt-get; or set CHROMIUM)"; exit 1
    fi
    echo "installing Debian's chromium"
    export DEBIAN_FRONTEND=noninteractive
    if ! { apt-get install -y --no-install-recommends chromium >"$cache/apt.log" 2>&1 ||
           { apt-get update >>"$cache/apt.log" 2>&1 &&
             apt-get install -y --no-install-recommends chromium >>"$cache/apt.log" 2>&1; }; }; then
      if grep -Eq "$offline" "$cache/apt.log"; then echo "apt mirror unreachable: skipping"; tail -3 "$cache/apt.log"; exit 77; fi
      echo "apt-get install chromium failed:"; cat "$cache/apt.log"; exit 1
    fi
  fi
) 9>"$cache/apt.lock"
code=$?
[ $code -ne 0 ] && exit $code
source "$here/../../support/npm_install.sh"
npm_install "$cache" "${pins[@]}" || exit $?

port=$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')
log="$out/server.log"
if [ "$mode" = real ]; then
  "$target" make-tiny --out "$out/model" >"$log" 2>&1 || { echo "make-tiny failed:"; cat "$log"; exit 1; }
  "$target" serve --model "$out/model" --port "$port" >"$log" 2>&1 &
else
  node "$here/mock_server.mjs" "$target" "$port" >"$log" 2>&1 &
fi
server=$!
stop_server() {
  kill -TERM "$server" 2>/dev/null
  for _ in $(seq 50); do kill -0 "$server" 2>/dev/null || break; sleep 0.2; done
  kill -KILL "$server" 2>/dev/null
  wait "$server" 2>/dev/null
}
trap stop_server EXIT

base="http://127.0.0.1:$port"
PAGE_FILE=$(cd "$here/../../.." && pwd)/apps/server/web/chat.html SERVER_PID=$server node "$here/chat_page.mjs" "$cache" "$base/" "$out" "$mode"
code=$?
[ $code -ne 0 ] && { echo "--- server log"; tail -50 "$log"; }
exit $code
