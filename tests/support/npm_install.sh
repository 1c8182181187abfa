# Sourced by the tests that use npm packages (test-time only, never runtime dependencies).
# npm_install CACHE PIN...: installs the pinned packages with the image's npm into
# CACHE/node_modules once per pin set (a stamp file; a lock serializes concurrent tests).
# Returns 0 when installed, 77 (ctest SKIP) when the registry is unreachable, 1 otherwise.
npm_offline='ENOTFOUND|ECONNREFUSED|ETIMEDOUT|EAI_AGAIN|ECONNRESET|ENETUNREACH|network'

npm_install() {
  local cache=$1
  shift
  mkdir -p "$cache"
  (
    flock 9
    [ -f "$cache/installed.stamp" ] && [ "$(cat "$cache/installed.stamp")" = "$*" ] && exit 0
    [ -f "$cache/package.json" ] || echo '{"private": true}' >"$cache/package.json"
    if ! (cd "$cache" && npm install --no-audit --no-fund --no-save --cache "$cache/.npm" "$@" \
          >"$cache/install.log" 2>&1); then
      if grep -Eq "$npm_offline" "$cache/install.log"; then
        echo "npm registry unreachable: skipping"; tail -3 "$cache/install.log"; exit 77
      fi
      echo "npm install failed:"; cat "$cache/install.log"; exit 1
    fi
    echo "$*" >"$cache/installed.stamp"
  ) 9>"$cache/install.lock"
}
