#!/usr/bin/env bash
# Writes scripts/symbol-order/symbols.txt: the functions agentls runs in a typical session
# (start, typing, an agent's turn, a review accepted), for the linker to put first in the
# binary (build.rs passes the file on in release builds). Laid out together they share pages,
# so an idle agentls maps the code it runs, not the code around it.
#
# Symbol names carry a hash of their crate's build settings and features, so the list is made
# from each build that ships or is measured: `cargo build --release` (installs) and `cargo bench`
# (whose dev-dependencies turn on more features of shared crates); the linker skips the names
# it does not find. Rerun after a dependency update or a new toolchain (the hashes change), or
# when the start-up or typing path changes much. Needs valgrind and python3; about five minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
out="$PWD/target/symbol-order"
rm -rf "$out" && mkdir -p "$out"

# Profiles the agentls binary that `cargo "$@"` builds, into "$out/$name.txt".
train() {
    local name=$1
    shift
    # The build as it ships (stripped), with a map of where each function went (build.rs).
    AGENTLS_LINK_MAP="$out/$name.map" cargo "$@"
    mkdir -p "$out/$name"
    cp target/release/agentls "$out/$name/agentls"
    scripts/symbol-order/train.py valgrind --tool=callgrind --dump-instr=yes \
        --compress-pos=no --compress-strings=no \
        --callgrind-out-file="$out/$name/callgrind.%p" "$out/$name/agentls" \
        2> "$out/$name/train.log"
    scripts/symbol-order/order.py "$out/$name.map" "$out/$name"/callgrind.* > "$out/$name.txt"
}

train release build --release --bin agentls
train bench bench --no-run
# Each name once, in the order first met.
awk '!seen[$0]++' "$out/release.txt" "$out/bench.txt" > scripts/symbol-order/symbols.txt
