#!/usr/bin/env python3
"""List the functions longer than N lines (default 100) in lnorm's sources outside tests/ and docs/.

    scripts/long_functions.py [N] [PATH ...]

A function is a brace block opened after a parameter list (`) {`, `) const {`, `) -> T {`, a constructor's
initializer list) at namespace or class level; lambdas and blocks inside it are part of it. Comments, strings and
character literals are skipped. The count is the lines from the opening line to the closing brace, both included.
Heuristic, standard library only; it reads C++ and CUDA (.cpp .hpp .h .cu .cuh).
"""
import os
import re
import sys

EXTS = (".cpp", ".hpp", ".h", ".cu", ".cuh")
SKIP = ("tests", "docs", "build", "out", ".git", "bench/results")


def strip(text):
    """The text with comments, strings and char literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif c == 'R' and text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (j + 1 - i)); i = j + 1
        else:
            out.append(c); i += 1
    return "".join(out)


def functions(path):
    text = strip(open(path, encoding="utf-8", errors="replace").read())
    stack = []  # (kind, start line, name) per open brace: kind 'fn' or 'scope'
    line, last = 1, 0
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c == "{":
            head = text[last:i]
            inside_fn = any(k == "fn" for k, _, _ in stack)
            is_fn = False
            name = ""
            if not inside_fn:
                h = " ".join(head.split())
                if not re.search(r"\b(namespace|struct|class|union|enum)\b[^()]*$", h) and not h.rstrip().endswith("="):
                    m = re.search(r"([~\w:<>]+)\s*\([^;]*\)\s*(const|noexcept|override|final|mutable|->[^{;]*|:[^;{]*|\s)*$", h)
                    if m and not re.match(r"(if|for|while|switch|catch)$", m.group(1)):
                        is_fn, name = True, m.group(1)
            stack.append(("fn" if is_fn else "scope", line, name))
            last = i + 1
        elif c == "}":
            if stack:
                kind, start, name = stack.pop()
                if kind == "fn" and not any(k == "fn" for k, _, _ in stack):
                    yield name, start, line - start + 1
            last = i + 1
        elif c == ";":
            last = i + 1


def main():
    args = sys.argv[1:]
    limit = int(args.pop(0)) if args and args[0].isdigit() else 100
    roots = args or ["."]
    found = []
    for root in roots:
        for dirpath, dirs, files in os.walk(root):
            rel = os.path.relpath(dirpath, ".")
            dirs[:] = [d for d in dirs if not any(os.path.join(rel, d).lstrip("./").startswith(s) for s in SKIP)]
            for f in files:
                if f.endswith(EXTS):
                    p = os.path.join(dirpath, f)
                    found += [(n, p, name, start) for name, start, n in functions(p) if n > limit]
    for n, p, name, start in sorted(found, reverse=True):
        print(f"{n:5d}  {os.path.relpath(p)}:{start}  {name}")
    print(f"{len(found)} functions over {limit} lines")


if __name__ == "__main__":
    main()
