#!/usr/bin/env bash
# The server's system calls per 1 KiB PUT, by call: netbench's pktfs server
# (`netbench serve-pktfs`, epoll loop, the server's default busy polling)
# built at a revision before a change against this tree's, under the same
# wrk load, alternately; `perf stat` counts the syscall tracepoints of the
# server's process, and /proc its user and system CPU time per request.
# Where a paired CPU-time run moves a cell, this says whether the server
# makes other calls, or more of them, per request.
#
#   bench/syscalls.sh REV [--runs 2] [--secs 8] [--conns 256]
#
# PAIRED_BEFORE_BIN=path uses an already built netbench for REV. The
# figures go to bench/results/syscalls-*.json.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
runs=2 secs=8 conns=256
args "bench/syscalls.sh REV [--runs N] [--secs S] [--conns C]" "runs secs conns" "$@"
need perf wrk
netbench_pair

work=$(mktemp -d /tmp/pktfs-syscalls-run-XXXXXX)
# Every call a receive, a send or a wait can be made with.
calls=recvmsg,recvfrom,read,readv,sendmsg,sendto,write,writev,epoll_wait,epoll_pwait,epoll_pwait2,epoll_ctl,accept4,io_uring_enter,futex,clock_gettime
events=$(sed 's/\([a-z_0-9]*\)/syscalls:sys_enter_\1/g' <<<"$calls")

# One run: prints "requests user_ticks system_ticks" then "call count" lines.
one() { # bin conns
    coproc SRV { exec "$1" serve-pktfs syscalls --io epoll --image-mib 1024 --dir /dev/shm 2>"$work/err"; }
    local line addr pid u0 s0 u1 s1 reqs
    read -r line <&"${SRV[0]}"
    addr=$(grep -oE '[0-9.]+:[0-9]+' <<<"$line" | head -1)
    pid=$SRV_PID
    wrk -t2 -c"$2" -d2s -s "$put_lua" "http://$addr/" >/dev/null
    read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$pid/stat")
    perf stat -x, -e "$events" -p "$pid" -o "$work/perf.txt" -- sleep $((secs + 1)) &
    local perf_pid=$!
    wrk -t2 -c"$2" -d"${secs}s" -s "$put_lua" "http://$addr/" >"$work/wrk.txt"
    read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$pid/stat")
    wait $perf_pid
    eval "exec ${SRV[1]}>&-"
    wait "$pid" || true
    reqs=$(grep -oE '^ +[0-9]+ requests' "$work/wrk.txt" | grep -oE '[0-9]+')
    echo "$reqs $((u1 - u0)) $((s1 - s0))"
    awk -F, '$1+0 > 0 {sub("syscalls:sys_enter_", "", $3); print $3, $1}' "$work/perf.txt"
}

stamp=$(date -u +%Y%m%dT%H%M%SZ)
dst="bench/results/syscalls-$stamp.json"
runs_file="$work/runs.txt"
: >"$runs_file"
for i in $(seq 1 "$runs"); do
    for which in before after; do
        if [[ $which == before ]]; then bin=$before_bin; else bin=$after_bin; fi
        echo "run $i/$runs: $which"
        { echo "RUN $which $i"; one "$bin" "$conns"; } >>"$runs_file"
    done
done
python3 - "$dst" "$before" "$after" "$machine" "$conns" "$(getconf CLK_TCK)" "$runs_file" <<'PY'
import json, sys
dst, before, after, machine, conns, hz, path = sys.argv[1:]
runs, cur = [], None
for line in open(path):
    f = line.split()
    if f[0] == "RUN":
        cur = {"which": f[1], "run": int(f[2]), "calls_per_request": {}}
        runs.append(cur)
    elif "requests" not in cur:
        cur["requests"] = int(f[0])
        cur["user_us_per_request"] = int(f[1]) * 1e6 / int(hz) / int(f[0])
        cur["system_us_per_request"] = int(f[2]) * 1e6 / int(hz) / int(f[0])
    else:
        cur["calls_per_request"][f[0]] = int(f[1]) / cur["requests"]
json.dump({"benchmark": "server system calls per 1 KiB PUT (perf stat, epoll loop)",
           "before": before, "after": after, "machine": machine, "conns": int(conns),
           "runs": runs}, open(dst, "w"), indent=1)
print(f"\nmachine: {machine}; {conns} connections")
print("| run | requests | user µs/req | system µs/req | calls per request |")
print("|---|---|---|---|---|")
for r in runs:
    calls = ", ".join(f"{k} {v:.3f}" for k, v in sorted(r["calls_per_request"].items()))
    print(f"| {r['which']} {r['run']} | {r['requests']} | {r['user_us_per_request']:.2f} | "
          f"{r['system_us_per_request']:.2f} | {calls} |")
print(f"written: {dst}")
PY
rm -rf "$work"
