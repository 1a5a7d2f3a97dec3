#!/usr/bin/env bash
# The server's own CPU per 1 KiB PUT before a change against after, with
# both servers up side by side and wrk's load switched between them every
# few seconds. bench/paired.sh runs whole netbench runs minutes apart, and
# on a shared 2-vCPU host the drift between them moves even identical
# binaries by more than the few percent a change is judged by (the A/A
# rows in docs/BENCHMARKS.md); here the two
# halves of a pair are seconds apart, so drift falls on both alike.
#
# For each loop (--io) and connection count, netbench's pktfs server built
# at REV and the one built from this tree (or at REV2) each serve a fresh
# image; after a warm-up, wrk loads them in turn for --secs, --slices times
# each, in ABBA order (before, after; after, before; ...). A slice's CPU
# per request is the server's utime + stime (/proc/PID/stat, all threads)
# over the requests wrk completed in it; pair n is each side's n-th slice.
#
#   bench/interleaved.sh REV [--after REV2] [--slices 20] [--secs 2] [--conns 16,256] [--io uring,epoll]
#                        [--readers N]
#
# --readers N attaches N direct readers to the after server's image
# (NETBENCH_DIRECT_READERS: processes of their own, reading the PUTs'
# files from the mapping throughout; their CPU is not the server's).
#
# PAIRED_BEFORE_BIN=path and PAIRED_AFTER_BIN=path use an already built
# netbench for REV and REV2; the same binary on both sides (with --after
# REV) is the method's A/A check. The slices and, per cell, the ratio of
# the medians and the median of the pair ratios go to
# bench/results/interleaved-*.json.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
slices=20 secs=2 conns=16,256 io=uring,epoll after= readers=0
args "bench/interleaved.sh REV [--after REV2] [--slices N] [--secs S] [--conns C,C] [--io uring,epoll] [--readers N]" \
    "after slices secs conns io readers" "$@"
need wrk
after_rev=$after
netbench_sides
machine_line
echo "before: $before ($before_bin)   after: $after ($after_bin)"

work=$(mktemp -d /tmp/pktfs-interleaved-XXXXXX)
servers=()
stop_servers() {
    local fd
    for fd in "${servers[@]}"; do eval "exec $fd>&-"; done
    servers=()
    wait || true
}
trap 'stop_servers; rm -rf "$work"; remove_worktrees' EXIT

# start BIN IO READERS: one server on a fresh image, with READERS direct
# readers attached; sets `addr` and `pid`. Its
# stdin is a fifo held open in `servers`: closing it stops the server.
n=0
start() {
    local fifo="$work/in.$n" outf="$work/out.$n" fd
    n=$((n + 1))
    mkfifo "$fifo"
    NETBENCH_DIRECT_READERS=$3 "$1" serve-pktfs interleaved --io "$2" --image-mib 1024 <"$fifo" >"$outf" 2>>"$work/err" &
    pid=$!
    exec {fd}>"$fifo"
    servers+=("$fd")
    until addr=$(grep -oE '[0-9.]+:[0-9]+' "$outf" | head -1) && [[ -n $addr ]]; do
        kill -0 "$pid" 2>/dev/null || { echo "$0: the server did not start:" >&2; cat "$work/err" >&2; exit 1; }
        sleep 0.1
    done
}

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# slice PID ADDR CONNS: loads one server for `secs`; prints "requests ticks".
slice() {
    local t0 t1 reqs
    t0=$(ticks "$1")
    wrk -t2 -c"$3" -d"${secs}s" -s "$put_lua" "http://$2/" >"$work/wrk.txt"
    t1=$(ticks "$1")
    reqs=$(grep -oE '^ +[0-9]+ requests' "$work/wrk.txt" | grep -oE '[0-9]+')
    echo "$reqs $((t1 - t0))"
}

stamp=$(date -u +%Y%m%dT%H%M%SZ)
rows="$work/rows.txt"
: >"$rows"
for loop in ${io//,/ }; do
    for c in ${conns//,/ }; do
        start "$before_bin" "$loop" 0
        b_addr=$addr b_pid=$pid
        start "$after_bin" "$loop" "$readers"
        a_addr=$addr a_pid=$pid
        for a in "$b_addr" "$a_addr"; do
            wrk -t2 -c"$c" -d2s -s "$put_lua" "http://$a/" >/dev/null
        done
        echo "$loop, $c conns: $slices slices of ${secs} s per side"
        for i in $(seq 1 "$slices"); do
            for which in $(halves "$i" abba); do
                if [[ $which == before ]]; then p=$b_pid a=$b_addr; else p=$a_pid a=$a_addr; fi
                read -r reqs t < <(slice "$p" "$a" "$c")
                echo "$loop $c $which $i $reqs $t" >>"$rows"
            done
        done
        stop_servers
    done
done

python3 - "bench/results/interleaved-$stamp.json" "$before" "$after" "$machine" "$secs" \
    "$(getconf CLK_TCK)" "$rows" "$readers" <<'PY'
import json, random, statistics, sys
dst, before, after, machine, secs, hz, path, readers = sys.argv[1:]
slices = []
for line in open(path):
    loop, conns, which, pair, reqs, ticks = line.split()
    reqs, ticks = int(reqs), int(ticks)
    slices.append({"io": loop, "conns": int(conns), "which": which, "pair": int(pair),
                   "requests": reqs, "ticks": ticks,
                   "cpu_us_per_request": ticks * 1e6 / int(hz) / reqs if reqs else None,
                   "req_per_s": reqs / float(secs)})
cells = []
for key in dict.fromkeys((s["io"], s["conns"]) for s in slices):
    side = {w: {s["pair"]: s for s in slices if (s["io"], s["conns"]) == key and s["which"] == w}
            for w in ("before", "after")}
    cpu = {w: [s["cpu_us_per_request"] for s in side[w].values() if s["cpu_us_per_request"]]
           for w in side}
    pairs = [side["after"][n]["cpu_us_per_request"] / side["before"][n]["cpu_us_per_request"]
             for n in side["before"] if n in side["after"]
             and side["before"][n]["cpu_us_per_request"] and side["after"][n]["cpu_us_per_request"]]
    rps = {w: statistics.median(s["req_per_s"] for s in side[w].values()) for w in side}
    # 95% percentile-bootstrap interval of the median pair ratio (seeded,
    # so the same slices give the same interval).
    rng = random.Random(59)
    boot = sorted(statistics.median(rng.choices(pairs, k=len(pairs))) for _ in range(2000))
    b, a = statistics.median(cpu["before"]), statistics.median(cpu["after"])
    cells.append({"io": key[0], "conns": key[1], "before_cpu_us": b, "after_cpu_us": a,
                  "ratio": a / b, "pair_ratio_median": statistics.median(pairs),
                  "pair_ratio_ci95": [boot[49], boot[1949]],
                  "before_req_per_s": rps["before"], "after_req_per_s": rps["after"],
                  "pairs": len(pairs)})
json.dump({"benchmark": "interleaved 1 KiB PUTs, server CPU per request", "before": before,
           "after": after, "after_direct_readers": int(readers), "machine": machine, "secs_per_slice": float(secs),
           "cells": cells, "slices": slices}, open(dst, "w"), indent=1)
print(f"\nmachine: {machine}")
print("| loop | connections | server CPU per request, before → after | after/before | median of pair ratios (95% interval) | req/s, before → after |")
print("|---|---|---|---|---|---|")
for c in cells:
    print(f"| {c['io']} | {c['conns']} | {c['before_cpu_us']:.2f} → {c['after_cpu_us']:.2f} µs | "
          f"{c['ratio']:.3f}x | {c['pair_ratio_median']:.3f}x ({c['pair_ratio_ci95'][0]:.3f}-{c['pair_ratio_ci95'][1]:.3f}) | "
          f"{c['before_req_per_s'] / 1e3:.1f}k → {c['after_req_per_s'] / 1e3:.1f}k |")
print(f"written: {dst}")
PY
