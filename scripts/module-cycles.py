#!/usr/bin/env python3
"""Report dependency cycles between modules, at every level of each crate.

Every target of every workspace member, as `cargo metadata` lists them
(libraries, binaries, integration-test binaries, examples and benches,
bench and test crates included), is checked on its own. A module's
children are the `mod NAME;` its file declares; a child's file is NAME.rs
beside the parent's (in the parent's folder), its own children in NAME/.
Modules that share a parent are checked against each other: `a` depends
on its sibling `b` when code in `a` or below it names `b` or anything
below it, by a path from `crate::`, `super::` or `self::` (in a `use` or
in code; comments skipped), or names an item its parent re-exports from
`b` (`use b::...::ITEM`). A module naming its own ancestors or
descendants is no dependency between siblings: a module and its children
are one unit, seen from outside. Exit 1 when a cycle exists that KNOWN
(below) does not list.

It also keeps the workspace's one module style: a module with children is
NAME.rs beside a folder NAME/, never NAME/mod.rs, and no `#[path]`.

Run by .ci/run; by hand: `scripts/module-cycles.py`.
"""
import json, os, re, subprocess, sys

ROOT = os.environ.get("PKTFS_ROOT") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Cycles known and not broken yet, by package: the modules each may
# involve, as paths from the crate's root (`a::b`). A known cycle may
# shrink but not grow, no other may appear, and an entry whose cycle is
# gone must be removed. Empty is the goal.
KNOWN = {
}

MOD_DECL = re.compile(r"^\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([\w:\s]+\))?\s+)?mod\s+(\w+)\s*;", re.M)
# A path from `crate`, `super` or `self`, with any `{...}` groups in it.
PATH = re.compile(r"\b(?:crate|super|self)(?:\s*::\s*(?:\w+|\{[^;]*?\}|\*))+", re.S)
# `use CHILD::...;` in a module's own file: what it re-exports.
USE_CHILD = re.compile(r"^\s*(?:pub(?:\([\w:\s]+\))?\s+)?use\s+(?:self::)?(\w+)::([^;]*);", re.M | re.S)
# An inline test module: paths below it are relative to it.
INLINE_TESTS = re.compile(r"^\s*mod\s+tests\s*\{", re.M)


def code(path):
    """The file's text with `//` comments (doc comments included) cut."""
    with open(path, encoding="utf-8") as f:
        return "\n".join(line.split("//", 1)[0] for line in f)


def targets():
    """(package name, target name, root file) of every workspace target."""
    out = subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1", "--offline"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    meta = json.loads(out)
    members = set(meta["workspace_members"])
    seen = set()
    for p in meta["packages"]:
        if p["id"] not in members:
            continue
        for t in p["targets"]:
            if t["src_path"] not in seen:
                seen.add(t["src_path"])
                yield p["name"], t["name"], t["src_path"]


def tree(root):
    """Every module of the target: its path (a tuple) -> (file, children)."""
    mods = {}

    def walk(file, path, folder):
        kids = MOD_DECL.findall(code(file))
        mods[path] = (file, kids)
        for k in kids:
            f = os.path.join(folder, k + ".rs")
            if not os.path.isfile(f):
                f = os.path.join(folder, k, "mod.rs")
            if os.path.isfile(f):
                walk(f, path + (k,), os.path.join(folder, k))

    walk(root, (), os.path.dirname(root))
    return mods


def expand(path):
    """`a::{b, c::{d, e}}` as the paths it names: a::b, a::c::d, a::c::e."""
    path = re.sub(r"\s+", "", path)
    m = re.match(r"^(.*?)::\{(.*)\}$", path)
    if not m:
        return [path]
    head, body, parts, depth, cur = m.group(1), m.group(2), [], 0, ""
    for ch in body:
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        p = p.split("as")[0] if re.search(r"\bas\b", p) else p
        if p in ("", "self"):
            out.append(head)
        elif p:
            out += expand(head + "::" + p)
    return out


def resolve(path, here):
    """The segments `path` names, from the crate's root, written in module `here`."""
    segs = path.split("::")
    at = list(here)
    i = 0
    if segs[0] == "crate":
        at, i = [], 1
    elif segs[0] == "self":
        i = 1
    while i < len(segs) and segs[i] == "super":
        at, i = at[:-1], i + 1
    return at + [s for s in segs[i:] if s != "*"]


def target_module(segs, mods, reexports):
    """The module `segs` lands in: the longest module prefix, or the child
    that module re-exports the next segment from."""
    k = len(segs)
    while k > 0 and tuple(segs[:k]) not in mods:
        k -= 1
    at = tuple(segs[:k])
    if k < len(segs):
        child = reexports.get(at, {}).get(segs[k])
        if child:
            at = at + (child,)
    return at


def graphs_of(root):
    """For every module with children: its children's dependency graph."""
    mods = tree(root)
    reexports = {}
    for path, (file, kids) in mods.items():
        names = {}
        for first, rest in USE_CHILD.findall(code(file)):
            if first in kids:
                for item in re.findall(r"(\w+)\s*(?=[,}]|$)", rest.replace("\n", " ")):
                    if item not in ("self", "super", "crate"):
                        names.setdefault(item, first)
        reexports[path] = names
    graphs = {}
    for path, (file, kids) in mods.items():
        graphs.setdefault(path, {k: set() for k in kids})
        text = code(file)
        cut = INLINE_TESTS.search(text)
        parts = [(text, path)] if not cut else [(text[: cut.start()], path), (text[cut.start():], path + ("tests",))]
        for chunk, here in parts:
            for raw in PATH.findall(chunk):
                for p in expand(raw):
                    to = target_module(resolve(p, here), mods, reexports)
                    d = 0
                    while d < len(path) and d < len(to) and path[d] == to[d]:
                        d += 1
                    if d < len(path) and d < len(to):
                        graphs.setdefault(path[:d], {}).setdefault(path[d], set()).add(to[d])
    return {p: g for p, g in graphs.items() if g}


def cycles(graph):
    """Tarjan's strongly connected components of more than one module."""
    found, stack, on, idx, low, n = [], [], set(), {}, {}, [0]

    def strong(v):
        idx[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in idx:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], idx[w])
        if low[v] == idx[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in idx:
            strong(v)
    return found


def style_errors(root):
    """mod.rs files and `#[path]` attributes in the target's tree."""
    base = os.path.dirname(root)
    out = []
    for d, _, fs in os.walk(base):
        for f in fs:
            if not f.endswith(".rs"):
                continue
            p = os.path.join(d, f)
            if f == "mod.rs":
                out.append(f"{os.path.relpath(p, ROOT)}: a mod.rs (the workspace's style is NAME.rs beside NAME/)")
            if re.search(r"#\[path\s*=", code(p)):
                out.append(f"{os.path.relpath(p, ROOT)}: a #[path] attribute")
    return out


def main():
    bad = checked = known = 0
    still = set()
    styled = set()
    for package, target, root in targets():
        base = os.path.dirname(root)
        if base not in styled:
            styled.add(base)
            for e in style_errors(root):
                bad += 1
                print(e)
        graphs = graphs_of(root)
        if not graphs:
            continue
        checked += 1
        where = os.path.relpath(root, ROOT)
        for parent, graph in sorted(graphs.items()):
            for comp in cycles(graph):
                edges = [f"{a} -> {b}" for a in comp for b in sorted(graph[a]) if b in comp]
                named = {"::".join(parent + (m,)) for m in comp}
                inside = f" in {'::'.join(parent)}" if parent else ""
                line = f"{package} ({where}): cycle{inside} among {', '.join(comp)} ({'; '.join(edges)})"
                if named <= KNOWN.get(package, set()):
                    known += 1
                    still.add(package)
                    print(f"known, not broken yet: {line}")
                else:
                    bad += 1
                    print(line)
    for package in sorted(set(KNOWN) - still):
        bad += 1
        print(f"{package}: its known cycle is gone; remove it from KNOWN in {os.path.relpath(__file__, ROOT)}")
    if bad == 0:
        print(f"no new module cycles at any level ({checked} targets with modules checked, {known} known)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
