#!/usr/bin/env bash
# Installs dependencies, builds the release preset and runs the main job on the
# built-in tiny model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release
exec build/release/apps/cli/dsv4 generate "$@"
