#!/usr/bin/env python3
"""Report dependency cycles between the top-level modules of each crate.

A module's files are src/NAME.rs and src/NAME/**; a reference is a path
`crate::OTHER` in code (comments skipped). Exit 1 when a cycle exists.
Run by .ci/run; by hand: `scripts/module-cycles.py`.
"""
import os, re, sys

ROOT = os.environ.get("PKTFS_ROOT") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRATES = ["layout", "fs", "ring", "netpath", "cli", "tier", "fsck", "mkfs", "pktfs", "tests", "testkit"]

def modules(src):
    mods = {}
    for e in os.listdir(src):
        p = os.path.join(src, e)
        name = e[:-3] if e.endswith(".rs") else e
        if name in ("lib", "main", "bin"):
            continue
        files = mods.setdefault(name, [])
        if os.path.isdir(p):
            for d, _, fs in os.walk(p):
                files += [os.path.join(d, f) for f in fs if f.endswith(".rs")]
        elif e.endswith(".rs"):
            files.append(p)
    return mods

def code(path):
    out = []
    for line in open(path, encoding="utf-8"):
        s = line.split("//", 1)[0]
        out.append(s)
    return "\n".join(out)

def cycles(graph):
    found, stack, on, idx, low, n = [], [], set(), {}, {}, [0]
    def strong(v):
        idx[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
        for w in graph.get(v, ()):
            if w not in idx:
                strong(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], idx[w])
        if low[v] == idx[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1:
                found.append(sorted(comp))
    for v in graph:
        if v not in idx:
            strong(v)
    return found

bad = 0
for c in CRATES:
    src = os.path.join(ROOT, c, "src")
    if not os.path.isdir(src):
        continue
    mods = modules(src)
    graph = {}
    for m, files in mods.items():
        refs = set()
        for f in files:
            text = code(f)
            refs |= set(re.findall(r"\bcrate::(\w+)", text))
            # `use crate::{a::X, b}`: each item's first name.
            for group in re.findall(r"\bcrate::\{([^;]*)\}", text):
                refs |= set(re.findall(r"(?:^|[{,])\s*(\w+)", group))
            # `super::X` in a top-level module's own file is the crate root.
            if os.path.dirname(f) == src:
                refs |= set(re.findall(r"\bsuper::(\w+)", text))
        graph[m] = sorted(r for r in refs if r in mods and r != m)
    for comp in cycles(graph):
        bad += 1
        edges = [f"{a} -> {b}" for a in comp for b in graph[a] if b in comp]
        print(f"{c}: cycle among {', '.join(comp)} ({'; '.join(edges)})")
if bad == 0:
    print("no module cycles")
sys.exit(1 if bad else 0)
