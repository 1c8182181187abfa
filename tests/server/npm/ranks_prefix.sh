#!/usr/bin/env bash
# The official OpenAI Node SDK (npm package openai, pinned; test-time only) against dsv4 serve
# on 2 ranks under mpirun with the prefix cache on (its default): a resent conversation reports
# cached_tokens and the same answer; /metrics reports the hits per rank (ranks_prefix.mjs).
# Exit 77 (ctest SKIP) only when the npm registry is unreachable.
# Usage: ranks_prefix.sh DSV4 CACHE_DIR WORKDIR mpirun-args...
set -uo pipefail
dsv4=$(realpath "$1") cache=$2 work=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$cache" && cache=$(cd "$cache" && pwd)
source "$here/../../support/npm_install.sh"
npm_install "$cache" "openai@6.49.0" || exit $?
rm -rf "$work" && mkdir -p "$work" && work=$(cd "$work" && pwd)
exec node "$here/ranks_prefix.mjs" "$dsv4" "$cache" "$work" "$@"
