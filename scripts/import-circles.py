#!/usr/bin/env python3
"""import-circles.py: the import circles between sibling modules under src/.

A module (a file, or a directory's mod.rs/<dir>.rs with its children) "imports" a sibling
when its code names it: `use super::x`, `crate::a::x`, or an item its parent re-exports from
x (`pub use x::Item` in the parent). Test code (`tests.rs`, `#[cfg(test)] mod tests { .. }`)
is left out. Prints each circle (a strongly connected set of siblings) and exits 1 if any.
"""
import os, re, sys
from collections import defaultdict

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")


def modpath(rel):
    parts = rel[:-3].split("/")
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def strip_tests(text):
    """Code only: no test module, no comments (doc links name modules too)."""
    i = text.find("#[cfg(test)]\nmod tests {")
    text = text if i < 0 else text[:i]
    return re.sub(r"//.*", "", text)


files = {}
for d, _, fs in os.walk(ROOT):
    for f in fs:
        if f.endswith(".rs") and f != "tests.rs" and "/tests/" not in os.path.join(d, f)[len(ROOT):]:
            rel = os.path.relpath(os.path.join(d, f), ROOT)
            files[modpath(rel)] = strip_tests(open(os.path.join(d, f)).read())

# Re-exports: (module, item) -> submodule it comes from.
reexp = {}
for m, text in files.items():
    for sub, items in re.findall(r"pub(?:\([a-z]+\))? use (?:self::)?([a-z_0-9]+)::\{([^}]*)\}", text):
        for it in re.findall(r"[A-Za-z_0-9]+", items):
            reexp[(m, it)] = sub
    for sub, it in re.findall(r"pub(?:\([a-z]+\))? use (?:self::)?([a-z_0-9]+)::([A-Za-z_0-9]+)\s*;", text):
        reexp[(m, it)] = sub


def resolve(path):
    """The deepest module of `path` (a tuple of names) that exists, following re-exports."""
    best = ()
    for i in range(1, len(path) + 1):
        if path[:i] in files:
            best = path[:i]
        else:
            if (best, path[i - 1]) in reexp and best == path[: i - 1]:
                best = best + (reexp[(best, path[i - 1])],)
            break
    return best


def refs(m, text):
    out = set()
    for p in re.findall(r"crate((?:::[A-Za-z_0-9]+)+)", text):
        out.add(resolve(tuple(p.split("::")[1:])))
    # super chains: super::super::x
    for sup, p in re.findall(r"((?:super::)+)([A-Za-z_0-9]+(?:::[A-Za-z_0-9]+)*)", text):
        n = sup.count("super::")
        base = m[: len(m) - n]
        out.add(resolve(base + tuple(p.split("::"))))
    # use super::{a, b::c}
    for sup, group in re.findall(r"use ((?:super::)+)\{([^}]*)\}", text):
        n = sup.count("super::")
        base = m[: len(m) - n]
        for it in re.findall(r"([A-Za-z_0-9]+)(?:::[A-Za-z_0-9]+)*", group):
            out.add(resolve(base + (it,)))
    for group in re.findall(r"use crate::\{([^}]*)\}", text):
        for it in re.findall(r"([A-Za-z_0-9]+)", group):
            out.add(resolve((it,)))
    return out


edges = defaultdict(set)
for m, text in files.items():
    for r in refs(m, text):
        # the sibling of m's ancestry that r falls in: same parent, different child
        k = 0
        while k < min(len(m), len(r)) and m[k] == r[k]:
            k += 1
        if k < len(m) and k < len(r):
            a, b = m[: k + 1], r[: k + 1]
            edges[a].add(b)

# Tarjan's SCC
index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]
sys.setrecursionlimit(10000)


def strong(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on.add(v)
    for w in edges.get(v, ()):
        if w not in index:
            strong(w)
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
            sccs.append(sorted(comp))


for v in list(edges):
    if v not in index:
        strong(v)
for c in sorted(sccs):
    print("circle: " + " <-> ".join("::".join(x) for x in c))
sys.exit(1 if sccs else 0)
