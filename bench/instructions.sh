#!/usr/bin/env bash
# The server's user-space instructions per 1 KiB PUT, counted by callgrind:
# netbench's pktfs server (`netbench serve-pktfs`, epoll loop, busy polling
# off) built at a revision before a change against this tree's, under the
# same wrk load, alternately. Instruction counts do not depend on what else
# the machine is doing, so this tells whether a change made the request
# path do more work when the paired CPU-time runs (bench/paired.sh) cannot
# tell a few percent from the host's drift. It counts user space only (the
# kernel's share of a request is not in it) and runs on epoll (valgrind
# does not follow io_uring's requests).
#
#   bench/instructions.sh REV [--runs 2] [--secs 8] [--conns 16,256] [--readers N]
#
# --readers N attaches N direct readers (netbench read-direct, processes of
# their own, not counted) to the after server's image, reading the PUTs'
# files from the mapping throughout: the holder's request path with
# readers attached against the before revision's without.
#
# PAIRED_BEFORE_BIN=path uses an already built netbench for REV. Each
# run's figures and the medians go to bench/results/instructions-*.json.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
runs=2 secs=8 conns=16,256 readers=0
args "bench/instructions.sh REV [--runs N] [--secs S] [--conns C,C] [--readers N]" "runs secs conns readers" "$@"
need valgrind callgrind_control wrk
netbench_pair

work=$(mktemp -d /tmp/pktfs-instr-run-XXXXXX)

# One run: the server under callgrind with instrumentation off until the
# load is warm, on for one wrk run of `secs`, off again; prints requests
# and instructions.
one() { # bin conns readers
    local out="$work/cg.out" err="$work/cg.err"
    rm -f "$out"
    coproc SRV { NETBENCH_DIRECT_READERS=$3 exec valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" \
        "$1" serve-pktfs instr --io epoll --busy-poll-us 0 --image-mib 1024 --dir /dev/shm 2>"$err"; }
    local line addr pid reqs ir
    read -r line <&"${SRV[0]}"
    addr=$(grep -oE '[0-9.]+:[0-9]+' <<<"$line" | head -1)
    pid=$SRV_PID
    wrk -t2 -c"$2" -d2s -s "$put_lua" "http://$addr/" >/dev/null
    callgrind_control -i on "$pid" >/dev/null 2>&1
    wrk -t2 -c"$2" -d"${secs}s" -s "$put_lua" "http://$addr/" >"$work/wrk.txt"
    callgrind_control -i off "$pid" >/dev/null 2>&1
    eval "exec ${SRV[1]}>&-"
    wait "$pid" || true
    reqs=$(grep -oE '^ +[0-9]+ requests' "$work/wrk.txt" | grep -oE '[0-9]+')
    ir=$(grep -E '^totals:' "$out" | awk '{print $2}')
    echo "$reqs $ir"
}

stamp=$(date -u +%Y%m%dT%H%M%SZ)
rows=()
for c in ${conns//,/ }; do
    for i in $(seq 1 "$runs"); do
        for which in before after; do
            if [[ $which == before ]]; then bin=$before_bin r=0; else bin=$after_bin r=$readers; fi
            read -r reqs ir < <(one "$bin" "$c" "$r")
            echo "$c conns, run $i, $which: $reqs requests, $ir instructions, $((ir / reqs)) per request"
            rows+=("$c $which $reqs $ir")
        done
    done
done
rm -rf "$work"
mkdir -p bench/results
python3 - "bench/results/instructions-$stamp.json" "$before" "$after" "$machine" "$readers" "${rows[@]}" <<'PY'
import json, statistics, sys
dst, before, after, machine, readers, *rows = sys.argv[1:]
runs = [dict(zip(("conns", "which", "requests", "instructions"), r.split())) for r in rows]
for r in runs:
    r["conns"] = int(r["conns"]); r["requests"] = int(r["requests"]); r["instructions"] = int(r["instructions"])
    r["per_request"] = r["instructions"] / r["requests"]
out = {"benchmark": "server user-space instructions per 1 KiB PUT (callgrind, epoll, no busy poll)",
       "before": before, "after": after, "after_direct_readers": int(readers), "machine": machine,
       "runs": runs, "medians": []}
print(f"\nmedians; machine: {machine}")
print("| connections | before | after | after/before |")
print("|---|---|---|---|")
for c in sorted({r["conns"] for r in runs}):
    b = statistics.median(r["per_request"] for r in runs if r["conns"] == c and r["which"] == "before")
    a = statistics.median(r["per_request"] for r in runs if r["conns"] == c and r["which"] == "after")
    out["medians"].append({"conns": c, "before": b, "after": a, "ratio": a / b})
    print(f"| {c} | {b:.0f} | {a:.0f} | {a/b:.3f}x |")
json.dump(out, open(dst, "w"), indent=1)
print(f"\nwritten: {dst}")
PY
