#!/usr/bin/env bash
# Direct reading against tmpfs and against the FUSE mount of the same
# image, in one run (bench/directbench: what it measures and how):
#   - pktfs-direct's read_at, one thread: 4 KiB random and 1 MiB
#     sequential reads of a 1 GiB file, against tmpfs pread;
#   - verify=always: the extra time per GB, beside CRC32C's time per GB;
#   - unmodified fio (psync, one job) under the preload shim on the mount,
#     against fio on tmpfs and on the plain mount.
# Medians of RUNS (default 5); the rows go to stdout and, with the machine
# and the commit, to bench/results/direct-TIMESTAMP.json.
#
#   bench/direct.sh [RUNS]
# Env: SIZE (bytes, default 1 GiB), SECS (per timed part, default 3).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
command -v fio >/dev/null || { echo "fio is not installed (apt-get install fio)" >&2; exit 2; }
[[ -e /dev/fuse ]] || { echo "no /dev/fuse" >&2; exit 2; }
cargo build --release -q -p pktfs -p pktfs-preload -p pktfs-directbench
rel="${CARGO_TARGET_DIR:-$repo/target}/release"
exec "$rel/directbench" --runs "${1:-5}" --size "${SIZE:-1073741824}" --secs "${SECS:-3}" \
    --pktfs "$rel/pktfs" --shim "$rel/libpktfs_preload.so" --out "$repo/bench/results"
