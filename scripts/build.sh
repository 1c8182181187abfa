#!/usr/bin/env bash
# Configures and builds one preset (release | asan | fuzz): every target, or the targets named.
# Usage: scripts/build.sh [preset [target...]]
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}
shift || true
cmake --preset "$preset" -G Ninja >/dev/null
targets=()
[ $# -gt 0 ] && targets=(--target "$@")
cmake --build --preset "$preset" -j "$(nproc)" "${targets[@]}"
