#!/usr/bin/env bash
# Installs dependencies, builds the one program the demo runs (dsv4: no test or benchmark
# target) and runs `dsv4 generate` on the built-in model (models/kjv-9m, trained on the King
# James Bible): without arguments, its demo prompts ("In the beginning", ...) continued greedily
# for 40 tokens, each printed as text; arguments go to `dsv4 generate` as they are (e.g. --mtp,
# --prompt TEXT, --temperature 0.8, --verbose for step lines and token ids).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release dsv4
[ $# -eq 0 ] && set -- --max-tokens 40
exec build/release/apps/cli/dsv4 generate "$@"
