#!/usr/bin/env bash
# Installs every build and test dependency from Debian packages. Idempotent:
# packages already present are skipped without touching apt.
# --browser also installs chromium (the chat page's browser test, release pass only);
# --train the trainer's packages (train/: PyTorch with OpenBLAS, the KJV corpus and its reader,
# regex, matplotlib; its tests run in the release pass only, label python).
# wamerican is the word list of the built-in model's demo test (tests/cli/demo_cli.sh).
# Usage: scripts/setup.sh [--browser] [--train]
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config ccache clang libclang-rt-14-dev
      libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libfmt-dev libcli11-dev
      libopenmpi-dev openmpi-bin libboost-dev libpcre2-dev python3-numpy curl jq wamerican
      libdnnl-dev gnuplot-nox  # dsv4 bench: oneDNN comparison rows (bench only), throughput PNG
      libsimde-dev  # the emulated linear ISA tests (tests/CMakeLists.txt dsv4_linear_emulated)
      json-schema-test-suite)  # JSON Schema keyword and format cases (tests/grammar/*_test.cc)
for flag in "$@"; do
  case "$flag" in
    --browser) pkgs+=(chromium) ;;
    --train) pkgs+=(python3-torch libopenblas0-pthread python3-regex python3-matplotlib bible-kjv
                    bible-kjv-text) ;;
    *) echo "setup: unknown flag $flag (expected --browser, --train)" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null ||
    { $SUDO apt-get update >/dev/null && $SUDO apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null; }
fi
echo "setup: all dependencies present"
