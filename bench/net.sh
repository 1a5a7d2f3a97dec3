#!/usr/bin/env bash
# The netpath benchmark (pktfs HTTP PUT/GET against its baselines, over
# loopback): see bench/netbench/src/main.rs and docs/NETPATH.md.
#   bench/net.sh [--size-mib 256] [--reps 5] [--secs 5] [--only put,small,get,volume]
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo run --release -q -p pktfs-netbench --bin netbench -- "$@"
