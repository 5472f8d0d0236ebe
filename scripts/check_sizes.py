#!/usr/bin/env python3
"""The size budget (ctest `sizes`, docs/contributing.md "File and function size"): no source file
over FILE_BUDGET lines and no function over FUNCTION_BUDGET lines, so a newcomer can read any
file and any function in one sitting. Files and functions that were already larger when the
budget was set are listed below with their size then: each is a ratchet, allowed to shrink, never
to grow, and the goal is to split it (remove its line once it fits). A function may also exceed
the budget when a comment in the three lines above it says why, starting `// Long:`.

Prints the five largest files and functions either way; exits 1 naming each breach.
    python3 scripts/check_sizes.py [--all]   (--all: every file and function over the budget)
"""
import os
import re
import subprocess
import sys

FILE_BUDGET = 1000
FUNCTION_BUDGET = 150

# path -> lines when the budget was set (2026-11-29): to split.
FILE_RATCHET = {
    "tests/unit/test_importer.cpp": 2406,
    "runtime/runtime.cpp": 1530,
    "tests/unit/test_kernels.cpp": 1353,
    "tests/unit/test_interp.cpp": 1109,
}

# "path:function" -> lines when the budget was set: to split.
FUNCTION_RATCHET = {
    "scripts/gen_bad_models.py:main": 232,
    "bench/costmodel.py:main": 207,
    "frontend/onnx_sym_values.cpp:compute": 188,
    "bench/run_bench.py:render": 166,
    "lower/recipe_online_norm.cpp:recipeOnlineNorm": 156,
    "cmd/aicfc.cpp:compile": 152,
    "target/hardware.cpp:detectHostHardware": 151,
}

SOURCE = re.compile(r"\.(cpp|h|cc|hpp|cu|py)$")
SKIP_DIRS = ("testdata/", "bench/work/", "bench/.venv/", "third_party/")
CONTAINER = re.compile(r"^\s*(namespace\b|class\b|struct\b|enum\b|union\b|extern\s+\"C\"|"
                       r"template\s*<[^>]*>\s*(class|struct)\b)")
CONTROL = re.compile(r"^\s*(if|for|while|switch|do|else|try|catch|return)\b")


def files(root):
    try:
        out = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True,
                             check=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        out = []
        for d, _, names in os.walk(root):
            out += [os.path.relpath(os.path.join(d, n), root) for n in names]
    return sorted(p for p in out if SOURCE.search(p) and not p.startswith(SKIP_DIRS))


def strip(line, in_block):
    """The line without comments and string / char literals (braces inside them don't count)."""
    out, i = "", 0
    while i < len(line):
        if in_block:
            j = line.find("*/", i)
            if j < 0:
                return out, True
            i, in_block = j + 2, False
            continue
        c = line[i]
        if line.startswith("//", i):
            break
        if line.startswith("/*", i):
            in_block, i = True, i + 2
            continue
        if c in "\"'":
            j = i + 1
            while j < len(line) and line[j] != c:
                j += 2 if line[j] == "\\" else 1
            i = j + 1
            continue
        out += c
        i += 1
    return out, in_block


def cpp_functions(lines):
    """(name, first line, length) of every function body at namespace or class scope."""
    found, stack, sig, in_block = [], [], [], False
    for n, raw in enumerate(lines, 1):
        code, in_block = strip(raw, in_block)
        for ch in code:
            if ch == "{":
                text = " ".join(sig + [re.split(r"[;}]", code.split("{")[0])[-1]])
                if all(k == "container" for k, _, _ in stack):
                    if CONTAINER.search(text) or "(" not in text or CONTROL.search(text) or \
                            re.search(r"=\s*$", text.strip()):
                        stack.append(("container" if CONTAINER.search(text) else "block", n, ""))
                    else:
                        m = re.search(r"([~\w:]+|operator\s*\S+)\s*\([^()]*", text)
                        name = m.group(1) if m else "?"
                        stack.append(("function", n, name))
                else:
                    stack.append(("block", n, ""))
                sig = []
            elif ch == "}":
                if stack:
                    kind, start, name = stack.pop()
                    if kind == "function":
                        found.append((name, start, n - start + 1))
                sig = []
            elif ch == ";":
                sig = []
        tail = re.split(r"[;{}]", code)[-1].strip()  # what follows the line's last statement
        if tail and not tail.startswith("#"):
            sig.append(tail)
            sig = sig[-6:]
    return found


def py_functions(lines):
    """(name, first line, length) of every def: to its last line indented deeper than it."""
    found, open_ = [], []  # [indent, name, start, last]
    for n, line in enumerate(lines, 1):
        body = line.strip()
        if not body or body.startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        while open_ and indent <= open_[-1][0] and not body.startswith((")", "]", "}")):
            _, name, start, last = open_.pop()
            found.append((name, start, last - start + 1))
        for o in open_:
            o[3] = n
        m = re.match(r"(\s*)(async\s+)?def (\w+)", line)
        if m:
            open_.append([len(m.group(1)), m.group(3), n, n])
    found += [(name, start, last - start + 1) for _, name, start, last in open_]
    return found


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    show_all = "--all" in sys.argv[1:]
    sizes, funcs, breaches = [], [], []
    for p in files(root):
        try:
            with open(os.path.join(root, p), encoding="utf-8", errors="replace") as f:
                lines = f.read().split("\n")
        except OSError:
            continue
        n = len(lines) - (1 if lines and lines[-1] == "" else 0)
        sizes.append((n, p))
        cap = FILE_RATCHET.get(p, FILE_BUDGET)
        if n > cap:
            breaches.append(f"{p}: {n} lines, over " +
                            (f"its recorded {cap} (split it; it may not grow)" if p in FILE_RATCHET
                             else f"the budget of {FILE_BUDGET} (split it by concept)"))
        for name, start, length in (py_functions(lines) if p.endswith(".py")
                                    else cpp_functions(lines)):
            funcs.append((length, f"{p}:{start}", name))
            key = f"{p}:{name}"
            cap = FUNCTION_RATCHET.get(key, FUNCTION_BUDGET)
            why = any(l.strip().startswith("// Long:")
                      for l in lines[max(0, start - 4):start - 1])
            if length > cap and not why:
                breaches.append(f"{p}:{start}: {name} is {length} lines, over " +
                                (f"its recorded {cap}" if key in FUNCTION_RATCHET else
                                 f"the budget of {FUNCTION_BUDGET} (split it, or say why in a "
                                 "'// Long:' comment above it)"))
    sizes.sort(reverse=True)
    funcs.sort(reverse=True)
    print(f"largest files (budget {FILE_BUDGET} lines):")
    for n, p in sizes[:5] if not show_all else [s for s in sizes if s[0] > FILE_BUDGET]:
        print(f"  {n:6d}  {p}")
    print(f"largest functions (budget {FUNCTION_BUDGET} lines):")
    for n, where, name in funcs[:5] if not show_all else [f for f in funcs
                                                          if f[0] > FUNCTION_BUDGET]:
        print(f"  {n:6d}  {name}  ({where})")
    for b in breaches:
        print("size budget:", b, file=sys.stderr)
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
