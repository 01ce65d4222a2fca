#!/usr/bin/env bash
# Runs the whole test suite, real peers included: installs them first (scripts/test-tools.sh),
# and builds the real-agent edit matrix (feature `real-peers`, tests/agent_matrix.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/test-tools.sh)"
cargo test --features real-peers "$@"
