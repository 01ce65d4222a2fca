#!/usr/bin/env bash
# Runs the whole test suite, real peers included: installs them first (scripts/test-tools.sh),
# and builds the real-agent edit matrix (feature `real-peers`, tests/agent_matrix.rs).
# With arguments, they go on to one `cargo test`. Without, the test binaries run side by side,
# since they mostly wait on agents, editors and timers: the agent matrix, the soak (CI's 2,000
# turns take four minutes) and the VS Code test each in a lane of its own, and the other
# binaries in two more lanes that take the next one from a queue when they finish one (the
# slowest first, so that the two end together). Each binary's output is printed when it ends;
# the three long lanes' at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/test-tools.sh)"
if [ $# -gt 0 ]; then
    exec cargo test --features real-peers "$@"
fi
cargo test --features real-peers --no-run
lanes=("--test agent_matrix" "--test soak" "--test editor_vscode")
# The slowest of the other binaries, queued first; the rest follow in name order. The
# settlement property goes last: its 10,000 cases each wake several threads, which a loaded
# machine makes wait (it takes 20 s alone, 86 s beside two busy loops).
slow=(editor_emacs chaos cli acp acp_peers agent_edits review_props chat mcp_tools)
last=(settlement_props)
queue=()
for name in "${slow[@]}"; do queue+=("--test $name"); done
for file in tests/*.rs; do
    name=$(basename "$file" .rs)
    [[ " ${lanes[*]} ${queue[*]} " == *" --test $name "* || " ${last[*]} " == *" $name "* ]] && continue
    queue+=("--test $name")
done
queue+=(--lib --bins --doc)
for name in "${last[@]}"; do queue+=("--test $name"); done
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
pids=()
for i in "${!lanes[@]}"; do
    # shellcheck disable=SC2086 # a lane is a list of cargo arguments
    cargo test --features real-peers ${lanes[$i]} >"$logs/$i" 2>&1 &
    pids+=($!)
done
# One queued binary: its output goes out whole when it ends (one at a time).
run_queued() {
    local log status
    log=$(mktemp -p "$logs")
    # shellcheck disable=SC2086 # a queue entry is a list of cargo arguments
    cargo test --features real-peers $1 >"$log" 2>&1 && status=0 || status=$?
    (
        flock 9
        echo "--- cargo test $1"
        cat "$log"
    ) 9>"$logs/print.lock"
    return "$status"
}
export -f run_queued
export logs
status=0
printf '%s\n' "${queue[@]}" | xargs -d '\n' -P 2 -I{} bash -c 'run_queued "$1"' _ {} || status=1
for i in "${!lanes[@]}"; do
    wait "${pids[$i]}" || status=1
    echo "--- cargo test ${lanes[$i]}"
    cat "$logs/$i"
done
exit "$status"
