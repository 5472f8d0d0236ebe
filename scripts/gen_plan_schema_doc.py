#!/usr/bin/env python3
"""docs/ir-format.md's table of plan.yaml fields, generated from support/plan_schema.def (the one
declaration of plan.yaml's fields), so the page cannot fall behind the schema. Run by ctest
(`plan_schema_doc`, with --check: exits 1 when the table differs from the schema's).

    python3 scripts/gen_plan_schema_doc.py [ROOT]           rewrite the table in place
    python3 scripts/gen_plan_schema_doc.py --check [ROOT]   only compare
"""
import os
import re
import sys

BEGIN = '<!-- plan.yaml fields: generated from support/plan_schema.def by ' \
        'scripts/gen_plan_schema_doc.py; do not edit -->'
END = '<!-- end of plan.yaml fields -->'
FIELD = re.compile(r'^AICF_PLAN_FIELD\((\w+), (\w+), (\w+), (\w+), (\w+), "(.*)"\)\s*$')
TYPES = {
    'Str': 'text', 'Quoted': 'text (double-quoted)', 'Int': 'integer',
    'Num': 'number (4 significant digits)', 'Bool': 'true / false', 'List': 'flow list',
    'Lines': 'block list', 'Dict': 'flow map (free keys)', 'Flow': 'flow map',
    'Block': 'block map', 'Flows': 'list of flow maps', 'Blocks': 'list of block maps',
}


def fields(root):
    out = []
    with open(os.path.join(root, 'support', 'plan_schema.def'), encoding='utf-8') as f:
        for line in f:
            m = FIELD.match(line)
            if m:
                out.append(m.groups())
    return out


def paths(rows):
    """Each section's paths in the file (`steps[].hints`; `inputs[], outputs[]` for io)."""
    where = {'plan': ['']}
    for section, key, typ, child, _, _ in rows:  # a section is held only by one declared above it
        if child != '_':
            suffix = '[]' if typ in ('Flows', 'Blocks') else ''
            where.setdefault(child, []).extend(
                (base + '.' if base else '') + key + suffix for base in where[section])
    return where


def table(root):
    rows = fields(root)
    where = paths(rows)
    lines = [BEGIN, '', '| field | type | | meaning |', '|---|---|---|---|']
    section = None
    for sec, key, typ, child, presence, doc in rows:
        if sec != section:
            section = sec
            name = ', '.join(f'`{p}`' for p in where[sec]) if sec != 'plan' else 'the top level'
            lines.append(f'| **{name}** (`{sec}`) | | | |')
        kind = TYPES[typ] + (f' of `{child}`' if child != '_' else '')
        lines.append(f'| `{key}` | {kind} | {"always" if presence == "Always" else "optional"}'
                     f' | {doc} |')
    lines += ['', END]
    return '\n'.join(lines)


def main():
    args = [a for a in sys.argv[1:] if a != '--check']
    check = '--check' in sys.argv[1:]
    root = args[0] if args else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    page = os.path.join(root, 'docs/ir-format.md')
    with open(page, encoding='utf-8') as f:
        text = f.read()
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < 0:
        print(f'{page}: no generated plan.yaml table (markers missing)')
        return 1
    new = text[:start] + table(root) + text[end + len(END):]
    if new == text:
        print('plan_schema_doc: docs/ir-format.md matches support/plan_schema.def')
        return 0
    if check:
        print('plan_schema_doc: docs/ir-format.md\'s plan.yaml table differs from '
              'support/plan_schema.def; run python3 scripts/gen_plan_schema_doc.py')
        return 1
    with open(page, 'w', encoding='utf-8') as f:
        f.write(new)
    print('plan_schema_doc: docs/ir-format.md rewritten')
    return 0


if __name__ == '__main__':
    sys.exit(main())
