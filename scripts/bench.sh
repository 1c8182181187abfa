#!/usr/bin/env bash
# The per-ISA part of `dsv4 bench` (the entry point for speed, docs/benchmarks.md): builds
# the release preset's benchmarks and runs the linear roofline: read
# bandwidth, then Flash-size linears per ISA variant (median of 5 repetitions;
# the development machine is shared and noisy).
# Usage: scripts/bench.sh [Google Benchmark flags, e.g. --benchmark_filter=wo_b]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release -G Ninja >/dev/null
cmake --build --preset release --target linear_bench -j "$(nproc)"
exec build/release/bench/linear_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true "$@"
