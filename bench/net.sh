#!/usr/bin/env bash
# The netpath benchmark (pktfs HTTP PUT/GET against its baselines and nginx,
# over loopback): see bench/netbench/src/main.rs and docs/NETPATH.md.
#   bench/net.sh [--only put,get,small,c10k,paced,volume] [--size-mib 256] [--reps 5]
#                [--secs 6] [--rounds 8] [--conns 1,16,256] [--wrk-threads 1]
#                [--many-conns 10000] [--many-secs 6] [--many-rounds 3]
#                [--paced-us 200] [--image-mib 1024] [--nginx PATH]
# Smoke test: bench/net.sh --secs 1 --rounds 1 --reps 1 --size-mib 16 --many-secs 2 --many-rounds 1
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo run --release -q -p pktfs-netbench --bin netbench -- "$@"
