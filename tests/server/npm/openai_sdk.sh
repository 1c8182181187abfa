#!/usr/bin/env bash
# The official OpenAI Node SDK (npm package openai, pinned; test-time only) against dsv4 serve:
# installs it into CACHE_DIR with the image's npm, then runs openai_sdk.mjs (completions and
# chat, streaming and not; 32 concurrent streams equal to offline dsv4 generate; a bounded load
# run with no lost or duplicated responses and flat server memory; tool calls through the SDK's
# stream helpers, scripted by REPLAY_TOOL).
# Exit 77 (ctest SKIP) only when the npm registry is unreachable.
# Usage: openai_sdk.sh DSV4 CACHE_DIR WORKDIR REPLAY_TOOL
set -uo pipefail
dsv4=$(realpath "$1") cache=$2 work=$3 replay=$(realpath "$4")
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$cache" && cache=$(cd "$cache" && pwd)
source "$here/../../support/npm_install.sh"
npm_install "$cache" "openai@6.49.0" || exit $?
rm -rf "$work" && mkdir -p "$work" && work=$(cd "$work" && pwd)
exec node "$here/openai_sdk.mjs" "$dsv4" "$cache" "$work" "$replay"
