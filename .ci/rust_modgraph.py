#!/usr/bin/env python3
"""The `crate::` graph of each Rust crate's modules must have no cycles.

A node is a module (`sweep::conversation`; `crate` is the root, lib.rs). Module A
has an edge to B when A's code (its tests aside) names a path `crate::B…` or
`super::…` that resolves to B or to an item of B; a path through B to a child
module of B counts for the child. A parent that declares and re-exports its
children (`mod x; pub use x::Y;`) has edges to them, so a child that takes an
item back from its parent (`use crate::Y`, `use super::Y`) makes a cycle.

Usage: rust_modgraph.py [crate_src_dir ...]   (default: every rust/*/src)
Prints each cycle and exits 1 if there is one.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path


def modules(src: Path) -> dict[str, Path]:
    """Module path -> file, for every .rs under src."""
    out: dict[str, Path] = {}
    for f in sorted(src.rglob("*.rs")):
        rel = f.relative_to(src).with_suffix("")
        parts = list(rel.parts)
        if parts in (["lib"], ["main"]):
            out["crate"] = f
            continue
        if parts[-1] == "mod":
            parts = parts[:-1]
        out["::".join(parts)] = f
    return out


def code_of(f: Path) -> str:
    text = f.read_text()
    # The unit tests are a child module of their own; their `use super::*` is no edge.
    cut = re.search(r"^#\[cfg\(test\)\]\s*\n\s*mod tests", text, re.M)
    text = text[: cut.start()] if cut else text
    # Comments say `crate::x` in prose: not code.
    text = re.sub(r"//[^\n]*", "", text)
    return text


def expand(path: str) -> list[str]:
    """`a::{b, c::{d}}` -> [a::b, a::c::d] (a shallow brace expansion)."""
    m = re.match(r"^(.*?)\{(.*)\}$", path)
    if not m:
        return [path]
    head, inner = m.group(1), m.group(2)
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        p = p.strip()
        if p:
            out += expand(head + p)
    return out


def target(mods: dict[str, Path], segs: list[str]) -> str:
    """The longest module prefix of a path (`crate` when none)."""
    for n in range(len(segs), 0, -1):
        name = "::".join(segs[:n])
        if name in mods:
            return name
    return "crate"


def edges(mods: dict[str, Path]) -> dict[str, set[str]]:
    g: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        code = code_of(f)
        here = [] if m == "crate" else m.split("::")
        paths = []
        for u in re.finditer(r"\buse\s+([^;]+);", code, re.S):
            paths += expand(re.sub(r"\s+", "", u.group(1)))
        inline = re.sub(r"\buse\s+[^;]+;", "", code)
        paths += re.findall(r"\b((?:crate|super)(?:::\w+)+)", inline)
        for mod in re.finditer(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", code, re.M):
            paths.append("self::" + mod.group(1))
        for p in paths:
            segs = [s for s in p.split("::") if s and s not in ("*",)]
            segs = [re.sub(r"\s+as\s+\w+$", "", s) for s in segs]
            if not segs:
                continue
            if segs[0] == "crate":
                base, rest = [], segs[1:]
            elif segs[0] == "super":
                base, rest = here[:-1], segs[1:]
            elif segs[0] == "self":
                base, rest = here, segs[1:]
            elif m == "crate" and "::".join(segs[:1]) in mods:
                base, rest = [], segs  # 2018 paths from the root: `use args::x`
            else:
                continue
            t = target(mods, base + rest)
            if t != m:
                g[m].add(t)
    return g


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g[v]):
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
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    srcs = [Path(a) for a in sys.argv[1:]] or sorted(root.glob("rust/*/src"))
    bad = 0
    for src in srcs:
        g = edges(modules(src))
        found = cycles(g)
        name = src.parent.name
        if found:
            bad = 1
            for comp in found:
                detail = "; ".join(f"{a} -> {', '.join(sorted(g[a] & set(comp)))}" for a in comp)
                print(f"{name}: module cycle among {', '.join(comp)} ({detail})")
        else:
            print(f"{name}: {len(g)} modules, no cycles")
    return bad


if __name__ == "__main__":
    sys.exit(main())
