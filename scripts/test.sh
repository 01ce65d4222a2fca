#!/usr/bin/env bash
# Runs the whole test suite, real peers included: installs them first (scripts/test-tools.sh),
# and builds the real-agent edit matrix (feature `real-peers`, tests/agent_matrix.rs).
# With arguments, they go on to one `cargo test`. Without, the long test binaries (the agent
# matrix and the soak, each minutes spent mostly waiting on agents and turns, and the VS Code
# test, a minute and a half) run beside the rest, and their output follows it.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/test-tools.sh)"
if [ $# -gt 0 ]; then
    exec cargo test --features real-peers "$@"
fi
cargo test --features real-peers --no-run
long=(agent_matrix soak editor_vscode)
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
pids=()
for name in "${long[@]}"; do
    cargo test --features real-peers --test "$name" >"$logs/$name" 2>&1 &
    pids+=($!)
done
rest=(--lib --bins)
for file in tests/*.rs; do
    name=$(basename "$file" .rs)
    [[ " ${long[*]} " == *" $name "* ]] || rest+=(--test "$name")
done
status=0
cargo test --features real-peers "${rest[@]}" || status=1
cargo test --features real-peers --doc || status=1
for i in "${!long[@]}"; do
    wait "${pids[$i]}" || status=1
    echo "--- tests/${long[$i]}.rs"
    cat "$logs/${long[$i]}"
done
exit "$status"
