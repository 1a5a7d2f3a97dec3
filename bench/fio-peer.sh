#!/usr/bin/env bash
# Build the peer for bench/fio.sh: the fuser crate's own `simple` example
# (the FUSE file system fuser ships as its reference), from a copy of the
# crate's published source under /tmp. Nothing of fuser is kept in the repo.
#   bench/fio-peer.sh            -> prints the path of the built binary
set -euo pipefail
ver="${FUSER_VERSION:-0.18.0}"
work="${PEER_DIR:-/tmp/pktfs-bench-peer}"
src=""
for d in "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/fuser-"$ver"; do
    [[ -d "$d" ]] && src="$d"
done
if [[ -z "$src" ]]; then
    # Not in the local registry yet: let cargo fetch it.
    tmp="$(mktemp -d)"
    (cd "$tmp" && cargo init -q --name fetch-fuser && cargo add -q "fuser@=$ver" && cargo fetch -q)
    rm -rf "$tmp"
    for d in "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/fuser-"$ver"; do
        [[ -d "$d" ]] && src="$d"
    done
fi
[[ -n "$src" ]] || { echo "cannot find fuser $ver's source" >&2; exit 1; }
mkdir -p "$work"
rm -rf "$work/fuser"
cp -r "$src" "$work/fuser"
# The crate pins an older toolchain; build with the one installed.
rm -f "$work/fuser/rust-toolchain" "$work/fuser/rust-toolchain.toml"
if ! (cd "$work/fuser" && CARGO_TARGET_DIR="$work/target" cargo build -q --release --example simple) 2>"$work/build.log"; then
    cat "$work/build.log" >&2
    exit 1
fi
echo "$work/target/release/examples/simple"
