#!/usr/bin/env bash
# Scrub throughput against the machine's CRC32C speed, in the same run.
#
# Fills an image on /dev/shm with FILES files of FILE_MIB MiB through
# `pktfs serve` (HTTP PUT, so the records are real received packets), then
# scrubs it RUNS times offline (the scrub opens the image itself) and RUNS
# times online (through the server's control socket while it serves), and
# prints the medians beside `pktfs machine`'s CRC32C speed. Target: scrub
# >= 0.8x the CRC speed.
#
#   bench/scrub.sh [RUNS]
# Env: PKTFS_BIN_DIR (prebuilt pktfs, mkfs-pktfs), FILES (8), FILE_MIB (256).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
runs="${1:-5}"
files="${FILES:-8}"
file_mib="${FILE_MIB:-256}"
command -v curl >/dev/null || { echo "curl is not installed (apt-get install curl)" >&2; exit 2; }
if [[ -z "${PKTFS_BIN_DIR:-}" ]]; then
    (cd "$repo" && cargo build --release -q -p pktfs -p pktfs-mkfs)
    PKTFS_BIN_DIR="${CARGO_TARGET_DIR:-$repo/target}/release"
fi
pktfs="$PKTFS_BIN_DIR/pktfs"
mkfs="$PKTFS_BIN_DIR/mkfs-pktfs"
img=/dev/shm/pktfs-scrub-bench.img
src=/dev/shm/pktfs-scrub-bench.src
port=18093
server=""
cleanup() {
    if [[ -n "$server" ]]; then kill -INT "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
    rm -f "$img" "$src"
}
trap cleanup EXIT

"$pktfs" machine
machine="$("$pktfs" machine --json)"
crc="$(sed -E 's/.*"crc32c_gb_per_s":([0-9.]+).*/\1/' <<<"$machine")"

need_mib=$((files * file_mib + 512))
"$mkfs" --size "${need_mib}M" --force -q "$img"
head -c "$((file_mib << 20))" /dev/urandom > "$src"
"$pktfs" serve "$img" --listen "127.0.0.1:$port" > /dev/null 2>&1 &
server=$!
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
for i in $(seq "$files"); do
    curl -s -f -o /dev/null -T "$src" "http://127.0.0.1:$port/f$i"
done

scrub_gbps() { # -> GB/s of one scrub
    "$pktfs" scrub "$img" --json | sed -E 's/.*"bytes_per_sec":([0-9]+).*/\1/' | awk '{printf "%.2f", $1/1e9}'
}
online=""
for _ in $(seq "$runs"); do online+="$(scrub_gbps) "; done
kill -INT "$server"; wait "$server" || true; server=""
offline=""
for _ in $(seq "$runs"); do offline+="$(scrub_gbps) "; done

median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
mo="$(median "$online")"; mf="$(median "$offline")"
echo
echo "scrub of $files x $file_mib MiB received files, median of $runs ($(date -u +%Y-%m-%d))"
echo
echo "| scrub | GB/s (runs) | median | CRC32C here | ratio | target |"
echo "|---|---|---|---|---|---|"
echo "| online (through the server) | $online| $mo | $crc | $(awk -v a="$mo" -v b="$crc" 'BEGIN{printf "%.2fx", a/b}') | >= 0.8x |"
echo "| offline | $offline| $mf | $crc | $(awk -v a="$mf" -v b="$crc" 'BEGIN{printf "%.2fx", a/b}') | >= 0.8x |"
