#!/usr/bin/env bash
# `pktfs recv` of a stream from nc against `nc -l > /dev/shm/file`, in the
# same run, unmounted and with the image mounted (the socket is passed to
# the mount daemon). Each row is the median of RUNS runs.
#
#   bench/recv.sh [RUNS]
# Env: PKTFS_BIN_DIR (prebuilt pktfs, mkfs-pktfs), MIB (256).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
runs="${1:-5}"
mib="${MIB:-256}"
for t in nc curl ss; do command -v "$t" >/dev/null || { echo "$t is not installed" >&2; exit 2; }; done
if [[ -z "${PKTFS_BIN_DIR:-}" ]]; then
    (cd "$repo" && cargo build --release -q -p pktfs -p pktfs-mkfs)
    PKTFS_BIN_DIR="${CARGO_TARGET_DIR:-$repo/target}/release"
fi
pktfs="$PKTFS_BIN_DIR/pktfs"
mkfs="$PKTFS_BIN_DIR/mkfs-pktfs"
img=/dev/shm/pktfs-recv-bench.img
src=/dev/shm/pktfs-recv-bench.src
out=/dev/shm/pktfs-recv-bench.out
mnt=/tmp/pktfs-recv-bench-mnt
port=19555
cleanup() {
    mountpoint -q "$mnt" 2>/dev/null && umount "$mnt"
    rm -f "$img" "$src" "$out"
}
trap cleanup EXIT
"$pktfs" machine
head -c "$((mib << 20))" /dev/urandom > "$src"
# Every run keeps its two files: room for all of them.
"$mkfs" --size "$((mib * 2 * runs + 256))M" --force -q "$img"
mkdir -p "$mnt"

now() { date +%s.%N; }
# GB/s of one transfer: $1 = receiver command (run in the background).
one() {
    local t0 t1
    rm -f "$out"
    bash -c "$1" & local rx=$!
    # Wait for the port to be bound (a probe connection would be taken as
    # the one stream).
    for _ in $(seq 200); do ss -ltn "sport = :$port" | grep -q LISTEN && break; sleep 0.01; done
    t0=$(now)
    nc -N 127.0.0.1 "$port" < "$src"
    wait "$rx"
    t1=$(now)
    awk -v b=$((mib << 20)) -v a="$t0" -v c="$t1" 'BEGIN{printf "%.3f", b/(c-a)/1e9}'
}
nc_l=""; rec=""; recm=""
for r in $(seq "$runs"); do
    nc_l+="$(one "nc -l 127.0.0.1 $port > $out") "
    rec+="$(one "$pktfs recv $img /f$r --listen 127.0.0.1:$port 2>/dev/null >/dev/null") "
    "$pktfs" mount "$img" "$mnt"
    recm+="$(one "$pktfs recv $img /m$r --listen 127.0.0.1:$port 2>/dev/null >/dev/null") "
    cmp -s "$src" "$mnt/m$r" || { echo "the received file differs from the source" >&2; exit 1; }
    umount "$mnt"
    for _ in $(seq 100); do pgrep -f -- "pktfs-recv-bench.img.*--daemon-child" >/dev/null || break; sleep 0.1; done
    rm -f "$out"
done
median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
a="$(median "$nc_l")"; b="$(median "$rec")"; c="$(median "$recm")"
echo
echo "$mib MiB from nc over loopback, median of $runs ($(date -u +%Y-%m-%d))"
echo
echo "| receiver | GB/s (runs) | median | ratio | target |"
echo "|---|---|---|---|---|"
echo "| nc -l > /dev/shm/file | $nc_l| $a | 1.00x | |"
echo "| pktfs recv, image not in use | $rec| $b | $(awk -v x="$b" -v y="$a" 'BEGIN{printf "%.2fx", x/y}') | >= 0.9x |"
echo "| pktfs recv, image mounted (socket passed to the daemon) | $recm| $c | $(awk -v x="$c" -v y="$b" 'BEGIN{printf "%.2fx of unmounted", x/y}') | within 5% |"
