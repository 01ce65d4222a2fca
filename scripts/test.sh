#!/usr/bin/env bash
# Runs the whole test suite, real peers included: installs them first (scripts/test-tools.sh),
# and builds the real-agent edit matrix (feature `real-peers`, tests/agent_matrix.rs).
# With arguments, they go on to one `cargo test`. Without, the test binaries run in five lanes
# side by side, since they mostly wait on agents, editors and timers: the agent matrix, the
# soak (CI's 2,000 turns take four minutes), the VS Code test, and the other binaries, taken in
# turn, in two. The first of those two prints as it goes, the other lanes' output follows it.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/test-tools.sh)"
if [ $# -gt 0 ]; then
    exec cargo test --features real-peers "$@"
fi
cargo test --features real-peers --no-run
lanes=("--test agent_matrix" "--test soak" "--test editor_vscode")
shown=(--lib --bins)
other=""
turn=0
for file in tests/*.rs; do
    name=$(basename "$file" .rs)
    [[ " ${lanes[*]} " == *" --test $name "* ]] && continue
    if ((turn++ % 2)); then other+=" --test $name"; else shown+=(--test "$name"); fi
done
lanes+=("$other")
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
pids=()
for i in "${!lanes[@]}"; do
    # shellcheck disable=SC2086 # a lane is a list of cargo arguments
    cargo test --features real-peers ${lanes[$i]} >"$logs/$i" 2>&1 &
    pids+=($!)
done
status=0
cargo test --features real-peers "${shown[@]}" || status=1
cargo test --features real-peers --doc || status=1
for i in "${!lanes[@]}"; do
    wait "${pids[$i]}" || status=1
    echo "--- cargo test ${lanes[$i]# }"
    cat "$logs/$i"
done
exit "$status"
