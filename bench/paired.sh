#!/usr/bin/env bash
# Paired runs of the 1 KiB PUT benchmark: netbench built at a revision
# before a change against netbench built from this tree, run alternately
# (before, after, before, after, ...) so that the host's drift from hour to
# hour falls on both alike. The headline is each loop's own server CPU per
# request (from /proc, as netbench measures it); req/s is printed beside it.
#
#   bench/paired.sh REV [--after REV2] [--runs 5] [--secs 6] [--rounds 4] [--conns 16,256]
#                       [--order abba] [--readers N]
#
# --readers N attaches N direct readers to the after side's pktfs servers
# (NETBENCH_DIRECT_READERS; processes of their own whose CPU is not the
# server's), reading the PUTs' files from the mapping throughout.
#
# Each run's rows go to bench/results/ as JSON (one file per run), and the
# medians with their after/before ratios to bench/results/paired-*.json
# (bench/paired-summary.py, which also reports the network-only server as
# the control: what the host alone moves a cell between two runs).
# --after REV2 measures REV2 instead of this tree (to split a range of
# commits into parts). PAIRED_BEFORE_BIN=path and PAIRED_AFTER_BIN=path use
# an already built netbench for REV and REV2.
#
# --order abba (the default) runs before then after in odd pairs, after
# then before in even ones (`halves` in bench/common.sh says why); --order
# ab always runs before first.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
runs=5 secs=6 rounds=4 conns=16,256 after= order=abba readers=0
args "bench/paired.sh REV [--after REV2] [--runs N] [--secs S] [--rounds R] [--conns C,C] [--order abba|ab] [--readers N]" \
    "after runs secs rounds conns order readers" "$@"
case $order in
    abba | ab) ;;
    *) echo "$0: --order takes abba or ab" >&2; exit 2 ;;
esac
after_rev=$after
netbench_sides

mkdir -p bench/results
stamp=$(date -u +%Y%m%dT%H%M%SZ)
machine_line
echo "before: $before ($before_bin)   after: $after ($after_bin)   order: $order"

# One run's markdown table -> JSON rows.
to_json() { # which rev out_file json_file
    python3 - "$1" "$2" "$3" "$4" "$machine" "$order" <<'EOF'
import json, re, sys
which, rev, out, dst, machine, order = sys.argv[1:]
rows = []
for line in open(out):
    m = re.match(r"\| (1 KiB PUT, \d+ conns: [^|]+?) \| ([^|]+?) \| ([0-9.]+) (\S+) \|", line)
    if m:
        rows.append({"measurement": m[1], "server": m[2], "median": float(m[3]), "unit": m[4]})
header = [l.strip() for l in open(out) if l.startswith("netbench on")]
json.dump({"benchmark": "netbench --only small", "which": which, "rev": rev,
           "machine": machine, "netbench_machine": header[0] if header else None,
           "order": order,
           "rows": rows}, open(dst, "w"), indent=1)
EOF
}

files=()
for i in $(seq 1 "$runs"); do
    for which in $(halves "$i" "$order"); do
        if [[ $which == before ]]; then bin=$before_bin r=$before n=0; else bin=$after_bin r=$after n=$readers; fi
        out=$(mktemp)
        echo "run $i/$runs: $which ($r)$([[ $n == 0 ]] || echo ", $n direct readers")"
        NETBENCH_DIRECT_READERS=$n "$bin" --only small --conns "$conns" --secs "$secs" --rounds "$rounds" >"$out" 2>&1
        dst="bench/results/netbench-small-$stamp-$i-$which.json"
        to_json "$which" "$r" "$out" "$dst"
        files+=("$dst")
        rm -f "$out"
    done
done

echo
bench/paired-summary.py --out "bench/results/paired-$stamp.json" "${files[@]}"
