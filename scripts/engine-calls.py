#!/usr/bin/env python3
"""The calls between the engine's files, read from the source (issue 35's "the calls between
engine files form no cycle except through the router").

Every `fn` inside an `impl ... Engine` block of `sim/src/engine/*.rs` is an engine handler; a
`self.NAME(` in one file's handler that names a handler of another file is a call between
files. Prints each file's outgoing edges (with how many call sites) and the strongly connected
components of more than one file: the cycles, twice: with every file, and without the router
(`mod.rs`, which carries out the effects handlers ask for: a cycle through it is a handler
asking for an effect, not a call back). Exits non-zero if a cycle is left without the router.
Usage: scripts/engine-calls.py [ENGINE_DIR]
"""
import re
import sys
from pathlib import Path

root = Path(sys.argv[1] if len(sys.argv) > 1 else "sim/src/engine")


def engine_blocks(text):
    """The bodies of `impl<...> Engine<...> {` blocks, found by brace counting."""
    for m in re.finditer(r"^impl<[^>]*>\s+Engine<[^>]*>\s*\{", text, re.M):
        depth, i = 1, m.end()
        while depth and i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        yield text[m.end():i]


handlers = {}  # name -> file
bodies = []  # (file, block text)
for path in sorted(root.glob("*.rs")):
    text = re.sub(r"//[^\n]*", "", path.read_text())
    for block in engine_blocks(text):
        bodies.append((path.stem, block))
        for name in re.findall(r"\bfn\s+(\w+)", block):
            handlers[name] = path.stem

edges = {}
for file, block in bodies:
    for name in re.findall(r"\bself\.(\w+)\s*\(", block):
        target = handlers.get(name)
        if target and target != file:
            edges.setdefault(file, {}).setdefault(target, 0)
            edges[file][target] += 1

files = sorted({f for f, _ in bodies})
for f in files:
    out = ", ".join(f"{t} ({n})" for t, n in sorted(edges.get(f, {}).items()))
    print(f"{f:12} -> {out}")

ROUTER = "mod"


def cycles_of(edges, files):
    """The strongly connected components of more than one file (Tarjan's)."""
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, {})):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            sccs.append(sorted(comp))

    for f in files:
        if f not in index:
            visit(f)
    return [c for c in sccs if len(c) > 1]


sys.setrecursionlimit(10000)
cycles = cycles_of(edges, files)
print(f"engine files: {len(files)}; call edges between files: "
      f"{sum(len(t) for t in edges.values())}; files in cycles: "
      f"{sum(len(c) for c in cycles)}")
for c in cycles:
    print(f"cycle of {len(c)} files: {' '.join(c)}")
bare = {f: {t: n for t, n in out.items() if t != ROUTER}
        for f, out in edges.items() if f != ROUTER}
left = cycles_of(bare, [f for f in files if f != ROUTER])
print(f"without the router ({ROUTER}.rs): files in cycles: {sum(len(c) for c in left)}")
for c in left:
    print(f"cycle of {len(c)} files: {' '.join(c)}")
sys.exit(1 if left else 0)
