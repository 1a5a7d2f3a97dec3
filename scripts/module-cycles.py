#!/usr/bin/env python3
"""Report dependency cycles between the top-level modules of each crate.

Every target of every workspace member, as `cargo metadata` lists them
(libraries, binaries, integration-test binaries, examples and benches,
bench and test crates included), is checked on its own. A target's
top-level modules are the `mod NAME;` its root file declares; a module's
files are NAME.rs and NAME/** beside the root. A module refers to another
by a path `crate::OTHER` in code (comments skipped), by `crate::ITEM`
where the root re-exports ITEM from OTHER (`pub use OTHER::...::ITEM`),
or by `super::OTHER` in its own top-level file. Exit 1 when a cycle
exists that KNOWN (below) does not list.

It also keeps the workspace's one module style: a module with children is
NAME.rs beside a folder NAME/, never NAME/mod.rs, and no `#[path]`.

Run by .ci/run; by hand: `scripts/module-cycles.py`.
"""
import json, os, re, subprocess, sys

ROOT = os.environ.get("PKTFS_ROOT") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Cycles known and not broken yet, by package: the modules each may
# involve. A known cycle may shrink but not grow, no other may appear, and
# an entry whose cycle is gone must be removed. Empty is the goal.
KNOWN = {
}

MOD_DECL = re.compile(r"^\s*(?:pub(?:\([\w:\s]+\))?\s+)?mod\s+(\w+)\s*;", re.M)
ROOT_USE = re.compile(r"^\s*(?:pub(?:\([\w:\s]+\))?\s+)?use\s+(?:self::|crate::)?(\w+)::([^;]*);", re.M | re.S)


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


def modules(root):
    """The top-level modules the root file declares, each with its files."""
    base = os.path.dirname(root)
    mods = {}
    for name in MOD_DECL.findall(code(root)):
        files = []
        single = os.path.join(base, name + ".rs")
        if os.path.isfile(single):
            files.append(single)
        folder = os.path.join(base, name)
        if os.path.isdir(folder):
            for d, _, fs in os.walk(folder):
                files += sorted(os.path.join(d, f) for f in fs if f.endswith(".rs"))
        mods[name] = files
    return mods


def reexports(root, mods):
    """Names the root imports from its modules: `crate::NAME` means that module."""
    names = {}
    for first, rest in ROOT_USE.findall(code(root)):
        if first not in mods:
            continue
        # The last segment of each path in the tree, or its `as` alias.
        for item in re.findall(r"(\w+)\s*(?=[,}]|$)", rest.replace("\n", " ")):
            if item not in ("self", "super", "crate"):
                names.setdefault(item, first)
    return names


def cycles(graph):
    """Tarjan's strongly connected components of more than one module."""
    found, stack, on, idx, low, n = [], [], set(), {}, {}, [0]

    def strong(v):
        idx[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
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


def graph_of(root):
    mods = modules(root)
    via = reexports(root, mods)
    base = os.path.dirname(root)
    graph = {}
    for m, files in mods.items():
        refs = set()
        for f in files:
            text = code(f)
            names = set(re.findall(r"\bcrate::(\w+)", text))
            # `use crate::{a::X, b}`: each item's first name.
            for group in re.findall(r"\bcrate::\{([^;]*)\}", text):
                names |= set(re.findall(r"(?:^|[{,])\s*(\w+)", group))
            # `super::X` in a top-level module's own file is the crate root.
            if os.path.dirname(f) == base:
                names |= set(re.findall(r"\bsuper::(\w+)", text))
            refs |= {n if n in mods else via.get(n) for n in names}
        graph[m] = sorted(r for r in refs if r and r != m)
    return graph


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
        graph = graph_of(root)
        if not graph:
            continue
        checked += 1
        where = os.path.relpath(root, ROOT)
        for comp in cycles(graph):
            edges = [f"{a} -> {b}" for a in comp for b in graph[a] if b in comp]
            line = f"{package} ({where}): cycle among {', '.join(comp)} ({'; '.join(edges)})"
            if set(comp) <= KNOWN.get(package, set()):
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
        print(f"no new module cycles ({checked} targets with modules checked, {known} known)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
