#!/usr/bin/env bash
# Runs the whole test suite, real peers included: installs them first (scripts/test-tools.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/test-tools.sh)"
cargo test "$@"
