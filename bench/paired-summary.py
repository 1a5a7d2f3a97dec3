#!/usr/bin/env python3
"""Medians of paired netbench runs (bench/paired.sh) and their after/before
ratios, with the noise floor they must be read against.

    bench/paired-summary.py [--out paired.json] RUN.json...

RUN.json are the per-run files bench/paired.sh writes
(bench/results/netbench-small-STAMP-N-{before,after}.json). For each pktfs
loop it prints the ratio of the medians (the headline) and the median of
the per-pair ratios (each pair's "after" run over its "before" run, run
one right after the other, so an hour's drift falls on both halves of a
pair alike).

The network-only server is the control: netbench's plain threaded TCP
server, whose 1 KiB PUT path no pktfs change touches, is run in the same
runs as the pktfs loops. Its after/before ratio is what the host alone
moves a cell between two builds; a pktfs ratio inside that band cannot be
told from no change by these runs (bench/instructions.sh can: it counts
instructions, which the host does not move).
"""
import json
import statistics
import sys

LOOPS = ["pktfs clwb uring", "pktfs clwb epoll"]
CONTROL = "network-only"
KEEP = ("server CPU per request", "req/s (wrk)")


def values(runs, which, server, measurement):
    return [r["median"] for run in runs if run["which"] == which
            for r in run["rows"] if r["server"] == server and r["measurement"] == measurement]


def pair_ratios(runs, server, measurement):
    """after/before of each pair: the n-th "after" run over the n-th
    "before" run, in the order given (paired.sh runs pair n's halves one
    right after the other, in either order)."""
    b = values(runs, "before", server, measurement)
    a = values(runs, "after", server, measurement)
    return [y / x for x, y in zip(b, a) if x]


def main(argv):
    dst = None
    if argv[:1] == ["--out"]:
        dst, argv = argv[1], argv[2:]
    if not argv:
        print("usage: bench/paired-summary.py [--out FILE] RUN.json...", file=sys.stderr)
        return 2
    runs = []
    for f in argv:
        try:
            runs.append(json.load(open(f)))
        except (OSError, ValueError) as e:
            print(f"paired-summary: {f}: {e}", file=sys.stderr)
            return 1
    machine = runs[0].get("machine")
    revs = {w: next((r["rev"] for r in runs if r["which"] == w), None) for w in ("before", "after")}
    order = runs[0].get("order", "ab")
    out = {"before": revs["before"], "after": revs["after"], "machine": machine,
           "order": order,
           "runs": len(runs) // 2, "files": argv, "control": CONTROL, "medians": []}
    print(f"medians of {len(runs) // 2} paired runs; machine: {machine}")
    print(f"order: {order}")
    print("| server | measurement | before | after | after/before | median of pair ratios |")
    print("|---|---|---|---|---|---|")
    whats = sorted({r["measurement"] for run in runs for r in run["rows"]
                    if r["measurement"].endswith(KEEP)})
    for s in LOOPS + [CONTROL]:
        for w in whats:
            b_runs, a_runs = values(runs, "before", s, w), values(runs, "after", s, w)
            if not b_runs or not a_runs:
                continue
            b, a = statistics.median(b_runs), statistics.median(a_runs)
            pairs = pair_ratios(runs, s, w)
            pm = statistics.median(pairs) if pairs else None
            out["medians"].append({"server": s, "measurement": w, "before": b, "after": a,
                                   "ratio": a / b, "pair_ratio_median": pm,
                                   "before_runs": b_runs, "after_runs": a_runs})
            name = f"{s} (control)" if s == CONTROL else s
            shown = f"{pm:.3f}x" if pm is not None else "-"
            print(f"| {name} | {w} | {b:g} | {a:g} | {a / b:.3f}x | {shown} |")
    if dst:
        json.dump(out, open(dst, "w"), indent=1)
        print(f"\nwritten: {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
