#!/usr/bin/env python3
"""long-fns.py [N]: the N longest functions in src/ (outside test modules and tests.rs files),
counted from the `fn` line to its closing brace: `lines file line name`. A function over ~80
lines should say why in a comment ("Long on purpose: ...")."""
import glob
import re
import sys

n_top = int(sys.argv[1]) if len(sys.argv) > 1 else 25
found = []
for path in glob.glob("src/**/*.rs", recursive=True):
    if path.endswith("tests.rs") or "/tests/" in path:
        continue
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        if re.match(r"\s*#\[cfg\(test\)\]", lines[i]):
            break  # test modules come last in this code base
        m = re.match(r"^(\s*)(pub(\([^)]*\))? )?(const )?fn (\w+)", lines[i])
        if not m:
            i += 1
            continue
        indent, name = len(m.group(1)), m.group(5)
        j = i
        while j < len(lines) and not lines[j].rstrip().endswith(("{", ";", "{}")):
            j += 1
        if j >= len(lines) or not lines[j].rstrip().endswith("{"):
            i = j + 1
            continue
        k = j + 1
        while k < len(lines) and not (
            lines[k].startswith(" " * indent + "}")
            and len(lines[k]) - len(lines[k].lstrip()) == indent
        ):
            k += 1
        found.append((k - i + 1, path, i + 1, name))
        i = k + 1
for row in sorted(found, reverse=True)[:n_top]:
    print(*row)
