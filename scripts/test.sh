#!/usr/bin/env bash
# Installs dependencies, builds a preset (default: release) and runs every test.
# Usage: scripts/test.sh [release|asan]
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}
# The release pass runs the browser test of the chat page (chromium) and the trainer's tests
# (PyTorch): their packages with it.
if [ "$preset" = release ]; then scripts/setup.sh --browser --train; else scripts/setup.sh; fi
scripts/build.sh "$preset"
if [ "$preset" = asan ]; then
  # OpenMPI's own allocations are not ours to fix.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fi
# Tests labelled npm (conformance against JavaScript references, packages installed from the
# npm registry at test time) and python (the trainer in train/, PyTorch) run in the release
# pass only.
exclude=()
[ "$preset" = asan ] && exclude=(-LE 'npm|python')
ctest --preset "$preset" -j "$(nproc)" "${exclude[@]}"
if [ "$preset" = release ]; then
  for f in build/release/tests/web_chat/chat_page.png build/release/tests/web_chat_mock/chat_page.png; do
    if [ -f "$f" ]; then echo "chat page screenshot: $PWD/$f"; fi
  done
fi
