#!/usr/bin/env bash
# Installs dependencies, builds a preset (default: release) and runs its tests; prints each
# stage's wall time and the ten slowest tests.
# Usage: scripts/test.sh [release|asan]
#   release: every test (labels npm and python included: the JavaScript references from the npm
#            registry, the browser test of the chat page, the trainer's PyTorch tests).
#   asan:    ASan + UBSan over what sanitizers can find bugs in; tests labelled npm, python or
#            release_only (runs that only repeat the release pass slower: long sweeps, 4-rank CLI
#            matrices, the bench smoke, the built-in model's demos) run in the release pass only.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}
stage_start=$(date +%s)
stage() {  # stage NAME: the wall time since the previous stage
  local now; now=$(date +%s)
  echo "test.sh [$preset] stage $1: $((now - stage_start)) s"
  stage_start=$now
}
if [ "$preset" = release ]; then scripts/setup.sh --browser --train; else scripts/setup.sh; fi
stage setup
scripts/build.sh "$preset"
stage build
labels=()
if [ "$preset" = asan ]; then
  # OpenMPI's own allocations are not ours to fix.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  labels=(-LE 'npm|python|release_only')
fi
log=build/$preset/ctest.log
set +e
ctest --preset "$preset" -j "$(nproc)" "${labels[@]}" 2>&1 | tee "$log"
code=${PIPESTATUS[0]}
set -e
stage tests
echo "test.sh [$preset] slowest tests:"
sed -n 's/^ *[0-9]*\/[0-9]* Test *#[0-9]*: \([^ ]*\) .* \([0-9.]*\) sec$/\2 \1/p' "$log" | sort -rn | head -10 |
  awk '{ printf "  %8.1f s  %s\n", $1, $2 }'
if [ "$preset" = release ]; then
  for f in build/release/tests/web_chat/chat_page.png build/release/tests/web_chat_mock/chat_page.png; do
    if [ -f "$f" ]; then echo "chat page screenshot: $PWD/$f"; fi
  done
fi
exit "$code"
