#!/usr/bin/env bash
# fio on tmpfs (/dev/shm), on a pktfs mount and on the peer (the fuser
# crate's `simple` example, built by bench/fio-peer.sh), in the same run:
#   - sequential write and read, 1 MiB blocks, one 512 MiB file;
#   - 4 KiB random read and random write on that file;
#   - metadata: create, stat and unlink 100,000 files, one at a time
#     (bench/fio-meta.rs: fio's filecreate/filestat/filedelete engines
#     spend more time in fio than in the file system at that count).
# psync, one job. Each row is the median of RUNS runs (default 3); every
# run starts from a fresh image / directory. Prints a Markdown table.
#
#   bench/fio.sh [RUNS]
# Env: PKTFS_BIN_DIR (prebuilt pktfs, mkfs-pktfs), PEER (prebuilt peer
# binary), SIZE (512M), NFILES (100000), RAND_RUNTIME (seconds, cap for
# each random job, 30), META_RUNTIME (seconds, cap for each metadata job,
# 60), PKTFS_OPTS (extra -o for the pktfs mount),
# ONLY ("tmpfs pktfs peer"), KEEP_LOGS (directory for fio's output).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
runs="${1:-3}"
size="${SIZE:-512M}"
nfiles="${NFILES:-100000}"
rand_runtime="${RAND_RUNTIME:-30}"
meta_runtime="${META_RUNTIME:-60}"
only="${ONLY:-tmpfs pktfs peer}"
logs="${KEEP_LOGS:-$(mktemp -d /tmp/pktfs-fio.XXXXXX)}"
mkdir -p "$logs"

command -v fio >/dev/null || { echo "fio is not installed (apt-get install fio)" >&2; exit 2; }
if [[ -z "${PKTFS_BIN_DIR:-}" ]]; then
    (cd "$repo" && cargo build --release -q -p pktfs -p pktfs-mkfs)
    PKTFS_BIN_DIR="${CARGO_TARGET_DIR:-$repo/target}/release"
fi
pktfs="$PKTFS_BIN_DIR/pktfs"
mkfs="$PKTFS_BIN_DIR/mkfs-pktfs"
meta="$logs/fio-meta"
rustc -O --edition 2021 -o "$meta" "$repo/bench/fio-meta.rs"
if [[ " $only " == *" peer "* ]]; then
    peer="${PEER:-$("$repo/bench/fio-peer.sh")}"
fi

base="/tmp/pktfs-fio-mnt"
img="/dev/shm/pktfs-fio.img"
peer_data="/dev/shm/pktfs-fio-peer-data"
tmpfs_dir="/dev/shm/pktfs-fio-tmpfs"
peer_pid=""

unmount_all() {
    for m in "$base/pktfs" "$base/peer"; do
        if mountpoint -q "$m" 2>/dev/null; then umount "$m" 2>/dev/null || umount -l "$m" || true; fi
    done
    if [[ -n "$peer_pid" ]]; then wait "$peer_pid" 2>/dev/null || true; peer_pid=""; fi
    # Let the pktfs daemon close its image.
    for _ in $(seq 100); do pgrep -f -- "pktfs-fio.img.*--daemon-child" >/dev/null || break; sleep 0.1; done
}
cleanup() {
    unmount_all
    rm -rf "$img" "$peer_data" "$tmpfs_dir"
}
trap cleanup EXIT

# Prepare a fresh file system of kind $1 and set $dir to test in.
prepare() {
    unmount_all
    case "$1" in
    tmpfs)
        rm -rf "$tmpfs_dir"; mkdir -p "$tmpfs_dir"; dir="$tmpfs_dir" ;;
    pktfs)
        mkdir -p "$base/pktfs"
        rm -f "$img"
        "$mkfs" --size 3G --force -q "$img"
        "$pktfs" mount "$img" "$base/pktfs" ${PKTFS_OPTS:+-o "$PKTFS_OPTS"}
        dir="$base/pktfs" ;;
    peer)
        mkdir -p "$base/peer"
        rm -rf "$peer_data"; mkdir -p "$peer_data"
        "$peer" --data-dir "$peer_data" --mount-point "$base/peer" >/dev/null 2>&1 &
        peer_pid=$!
        for _ in $(seq 100); do mountpoint -q "$base/peer" && break; sleep 0.1; done
        mountpoint -q "$base/peer" || { echo "the peer did not mount" >&2; exit 1; }
        dir="$base/peer" ;;
    esac
}

# fio terse v3 fields: 7 read KiB/s, 8 read IOPS, 48 write KiB/s, 49 write IOPS.
fio_terse() { fio --output-format=terse --terse-version=3 "$@" 2>>"$logs/fio.err"; }

run_one() { # kind run -> lines "row value" on stdout
    local kind="$1" run="$2" out
    prepare "$kind"
    local f="$dir/fio.dat"
    local common=(--ioengine=psync --numjobs=1 --filename="$f" --size="$size")
    out="$(fio_terse --name=seqwrite "${common[@]}" --rw=write --bs=1M)"
    echo "$out" > "$logs/$kind-$run-seqwrite.terse"
    echo "seqwrite $(awk -F';' '{printf "%.3f", $48*1024/1e9}' <<<"$out")"
    if [[ "$kind" == pktfs ]]; then
        # Read cold, as after a reboot: a fresh mount has verified nothing
        # yet, so the read pays for checking every record's CRC (with the
        # default verify=once; records written in this mount would start
        # verified). tmpfs and the peer have no checksums to pay for.
        umount "$base/pktfs"
        for _ in $(seq 100); do pgrep -f -- "pktfs-fio.img.*--daemon-child" >/dev/null || break; sleep 0.1; done
        "$pktfs" mount "$img" "$base/pktfs" ${PKTFS_OPTS:+-o "$PKTFS_OPTS"}
    fi
    out="$(fio_terse --name=seqread "${common[@]}" --rw=read --bs=1M)"
    echo "$out" > "$logs/$kind-$run-seqread.terse"
    echo "seqread $(awk -F';' '{printf "%.3f", $7*1024/1e9}' <<<"$out")"
    out="$(fio_terse --name=randread "${common[@]}" --rw=randread --bs=4k --runtime="$rand_runtime")"
    echo "$out" > "$logs/$kind-$run-randread.terse"
    echo "randread $(awk -F';' '{printf "%.0f", $8}' <<<"$out")"
    out="$(fio_terse --name=randwrite "${common[@]}" --rw=randwrite --bs=4k --runtime="$rand_runtime")"
    echo "$out" > "$logs/$kind-$run-randwrite.terse"
    echo "randwrite $(awk -F';' '{printf "%.0f", $49}' <<<"$out")"
    rm -f "$f"
    # create, stat, unlink $nfiles files (bench/fio-meta.rs); each phase
    # stops after META_RUNTIME seconds.
    "$meta" "$dir/meta" "$nfiles" "$meta_runtime" 2>>"$logs/meta.err" | tee "$logs/$kind-$run-meta.txt"
    unmount_all
}

declare -A vals
for run in $(seq "$runs"); do
    for kind in $only; do
        echo "run $run/$runs: $kind" >&2
        run_one "$kind" "$run" > "$logs/$kind-$run.rows"
        while read -r row v; do
            vals["$kind,$row"]+="$v "
            echo "  $row $v" >&2
        done < "$logs/$kind-$run.rows"
    done
done

median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b+0 == 0 || a == "nan" || b == "nan") print "-"; else printf "%.2fx", a/b}'; }
fmt() { awk -v v="$1" -v u="$2" 'BEGIN {if (v == "nan") print "-"; else if (u == "GB/s") printf "%.2f GB/s", v; else if (v >= 1000) printf "%.1fk", v/1000; else printf "%.0f", v}'; }

echo
echo "fio psync, 1 job, $size file, $nfiles files; median of $runs runs ($(date -u +%Y-%m-%d), $(nproc) CPUs, $(uname -r)); pktfs -o ${PKTFS_OPTS:-(defaults)}, reads after a remount"
"$pktfs" machine
echo
echo "| row | tmpfs | pktfs | peer (fuser simple) | pktfs / peer | pktfs / tmpfs |"
echo "|---|---|---|---|---|---|"
for row in seqwrite seqread randread randwrite create stat delete; do
    case "$row" in
    seqwrite) name="sequential write, 1 MiB"; unit="GB/s" ;;
    seqread) name="sequential read, 1 MiB"; unit="GB/s" ;;
    randread) name="random read, 4 KiB (IOPS)"; unit="" ;;
    randwrite) name="random write, 4 KiB (IOPS)"; unit="" ;;
    create) name="create (files/s)"; unit="" ;;
    stat) name="stat (files/s)"; unit="" ;;
    delete) name="unlink (files/s)"; unit="" ;;
    esac
    t="$(median "${vals["tmpfs,$row"]:-}")"
    p="$(median "${vals["pktfs,$row"]:-}")"
    q="$(median "${vals["peer,$row"]:-}")"
    echo "| $name | $(fmt "$t" "$unit") | $(fmt "$p" "$unit") | $(fmt "$q" "$unit") | $(ratio "$p" "$q") | $(ratio "$p" "$t") |"
done
echo
echo "fio output: $logs"
