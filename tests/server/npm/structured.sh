#!/usr/bin/env bash
# Structured output checked by independent npm tools (test-time only): ajv (with ajv-formats)
# validates every answer that ended with EOS against its random schema, on a random tiny model and on the
# built-in model; the OpenAI SDK's chat.completions.parse with a zod schema returns a parsed
# object. Exit 77 (ctest SKIP) only when the npm registry is unreachable.
# Usage: structured.sh DSV4 CACHE_DIR WORKDIR BUILTIN_MODEL_DIR [REQUESTS]
set -uo pipefail
dsv4=$(realpath "$1") cache=$2 work=$3 builtin=$(realpath "$4") requests=${5:-240}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$cache" && cache=$(cd "$cache" && pwd)
source "$here/../../support/npm_install.sh"
npm_install "$cache" "openai@6.49.0" "ajv@8.20.0" "ajv-formats@3.0.1" "zod@4.6.7" || exit $?
rm -rf "$work" && mkdir -p "$work" && work=$(cd "$work" && pwd)
exec node "$here/structured.mjs" "$dsv4" "$cache" "$work" "$builtin" "$requests"
