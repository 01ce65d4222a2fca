#!/usr/bin/env bash
# Writes scripts/symbol-order/symbols.txt: the functions agentls runs in typical sessions
# (start, typing, an agent's session started; then a turn and a review accepted), for the
# linker to put first in the binary (build.rs passes the file on in release builds). Laid out
# together they share pages, so an idle agentls maps the code it runs, not the code around it.
# What every user runs to reach an idle session comes first, what a turn adds after it: idle,
# the pages of a turn's code are not mapped.
#
# Symbol names carry a hash of their crate's build settings and features, so the list is made
# from each build that ships or is measured: `cargo build --release` (installs) and `cargo bench`
# (whose dev-dependencies turn on more features of shared crates); the linker skips the names
# it does not find. Rerun after a dependency update or a new toolchain (the hashes change), or
# when the start-up or typing path changes much. Needs valgrind and python3; about seven minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
out="$PWD/target/symbol-order"
rm -rf "$out" && mkdir -p "$out"

USERS=(configured default plain) # train.py's
# Profiles the agentls binary that `cargo "$@"` builds, each user's session of train.py, into
# "$out/$name.start.txt" (to an idle session) and "$out/$name.turn.txt" (the rest).
train() {
    local name=$1
    shift
    # The build as it ships (stripped), with a map of where each function went (build.rs).
    AGENTLS_LINK_MAP="$out/$name.map" cargo "$@"
    mkdir -p "$out/$name"
    cp target/release/agentls "$out/$name/agentls"
    local user
    for user in "${USERS[@]}"; do
        scripts/symbol-order/train.py "$user" valgrind --tool=callgrind --dump-instr=yes \
            --compress-pos=no --compress-strings=no \
            --callgrind-out-file="$out/$name/$user.%p" "$out/$name/agentls" \
            2> "$out/$name/$user.log"
    done
    # callgrind names the dump train.py asked for `<file>.1`, the one at exit `<file>`.
    scripts/symbol-order/order.py "$out/$name.map" "$out/$name"/*.1 > "$out/$name.start.txt"
    scripts/symbol-order/order.py "$out/$name.map" \
        $(ls "$out/$name"/*.[0-9]* | grep -v '\.1$') > "$out/$name.turn.txt"
}

train release build --release --bin agentls
train bench bench --no-run
# Each name once, in the order first met.
awk '!seen[$0]++' "$out"/{release,bench}.start.txt "$out"/{release,bench}.turn.txt \
    > scripts/symbol-order/symbols.txt
