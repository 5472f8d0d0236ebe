#!/usr/bin/env python3
"""The layering of aicf's libraries (CMakeLists.txt): a folder may include headers only from the
folders below it. Run by ctest (`layering`); prints every offending #include and exits 1."""
import os
import re
import sys

# folder -> the folders it may include (itself always allowed); transitive closure computed below.
DEPS = {
    'support': [],
    'ir': ['support'],
    'interp': ['ir'],
    'frontend': ['ir', 'interp'],
    'target': ['support'],
    'passes': ['ir', 'interp', 'target'],
    'kir': ['ir'],
    'lower': ['kir', 'target', 'passes'],
    'plan': ['lower'],
    'backend/c': ['kir'],
    'backend/host': ['backend/c', 'runtime'],  # runtime/isa_features.h: the runtime's own table
    'backend/cuda': ['backend/c', 'plan'],
    'driver': ['plan', 'backend/host', 'backend/cuda', 'frontend'],
    # support/sym_expr.h (compiled into the runtime, CMakeLists.txt) and the header-only
    # support/buffer_kind.h, support/enum_names.h, support/plan_schema.h and support/plan_yaml.h
    # only
    'runtime': ['support'],
}


def closure(folder, seen=None):
    seen = set() if seen is None else seen
    for d in DEPS[folder]:
        if d not in seen:
            seen.add(d)
            closure(d, seen)
    return seen


def folder_of(path):
    for f in sorted(DEPS, key=len, reverse=True):
        if path == f or path.startswith(f + '/'):
            return f
    return None


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(__file__))
    bad = []
    for folder in DEPS:
        allowed = closure(folder) | {folder}
        top = os.path.join(root, folder)
        if not os.path.isdir(top):
            continue
        for name in sorted(os.listdir(top)):
            if not name.endswith(('.h', '.cpp')):
                continue
            path = os.path.join(folder, name)
            with open(os.path.join(root, path), encoding='utf-8') as f:
                for lineno, line in enumerate(f, 1):
                    m = re.match(r'#include "([^"]+)"', line)
                    if not m:
                        continue
                    dep = folder_of(os.path.dirname(m.group(1)))
                    if dep is not None and dep not in allowed:
                        bad.append(f'{path}:{lineno}: {folder} may not include {m.group(1)} '
                                   f'({dep} is not below {folder})')
    for b in bad:
        print(b)
    print(f'layering: {len(bad)} violation(s)')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
