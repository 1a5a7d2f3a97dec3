#!/usr/bin/env bash
# The tier against rclone and s3fs on one Garage, in one run (release build).
# Needs garage (cargo install --locked garage), rclone, s3fs, fuse3; runs as
# root (FUSE mounts). Options go to tierbench: --reps N (3), --big-files N
# (1024 x 1 MiB), --small-files N (100000 x 4 KiB), --records N (1000000),
# --cold-readahead N (the mount's --tier-readahead, 8),
# --ingest-mib N (6144 x 1 MiB PUTs), --only big,small,cold,ingest,mount (all).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
for t in garage rclone s3fs fusermount3; do
    command -v "$t" >/dev/null || { echo "tier.sh: $t is missing (see .ci/run)"; exit 1; }
done
cargo build --release -q -p pktfs -p pktfs-tierbench
exec target/release/tierbench "$@"
