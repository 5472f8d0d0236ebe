#!/usr/bin/env python3
"""Every document a file of this repository cites must be in this repository. Run by ctest
(`doc_refs`); prints file:line for each dangling reference and exits 1.

Scanned: every text file git tracks (plus untracked files not ignored, so a new page counts
before it is committed). Checked:
  * each name ending in `.md` (a word, optionally with a path: `docs/usage.md`, `../README.md`)
    must name a file, relative to the citing file's folder or to the repository root, inside
    the repository;
  * in Markdown files, every relative link target `](path)` must exist, and a `#anchor` (on
    another page or on the same one) must be one of that page's headings, spelled as GitHub
    spells heading anchors;
  * a quoted section name after a cited page (`docs/safety.md, "Exit codes"`), or after the
    word README (the root README), must be part of one of that page's headings. A citation may
    run onto the next comment line.
"""
import os
import re
import subprocess
import sys

MD_NAME = re.compile(r'(?<![\w/.-])((?:\.\.?/)*[\w][\w./-]*\.md)(?![\w])')
MD_LINK = re.compile(r'\]\(([^)\s]+)\)')
README_SECTION = re.compile(r'\bREADME,?\s+"([^"]+)"')
SECTION_AFTER = re.compile(r'^,?:?\s+"([^"]+)"')
COMMENT_LEAD = re.compile(r'^\s*(//+|#+|\*|;+)?\s*')
HEADING = re.compile(r'^(#{1,6})\s+(.*?)\s*#*\s*$')
SKIP_EXT = ('.onnx', '.npy', '.png', '.jpg', '.pb', '.bin', '.so', '.a', '.gz', '.whl', '.zip')


def repo_files(root):
    try:
        out = subprocess.run(['git', 'ls-files', '--cached', '--others', '--exclude-standard'],
                             cwd=root, capture_output=True, text=True, check=True).stdout
        names = out.splitlines()
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: walk the sources
        names = []
        for top, dirs, fs in os.walk(root):
            rel = os.path.relpath(top, root)
            dirs[:] = [d for d in dirs if not d.startswith(('.', 'build')) and
                       os.path.normpath(os.path.join(rel, d)) not in ('bench/work', 'bench/models')]
            names += [os.path.normpath(os.path.join(rel, f)) for f in fs]
    return sorted({f for f in names if os.path.isfile(os.path.join(root, f))})


def read_text(path):
    with open(path, 'rb') as f:
        data = f.read()
    if b'\0' in data:
        return None
    return data.decode('utf-8', errors='replace')


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', heading)  # a link keeps its text
    text = text.strip().lower()
    text = ''.join(c for c in text if c.isalnum() or c in ' -_')
    return text.replace(' ', '-')


def anchors_of(text):
    seen = {}
    out = set()
    in_code = False
    for line in text.splitlines():
        if line.lstrip().startswith('```'):
            in_code = not in_code
            continue
        m = None if in_code else HEADING.match(line)
        if m:
            s = slug(m.group(2))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else '%s-%d' % (s, n))
    return out


def headings_of(text):
    out = []
    in_code = False
    for line in text.splitlines():
        if line.lstrip().startswith('```'):
            in_code = not in_code
            continue
        m = None if in_code else HEADING.match(line)
        if m:
            out.append(m.group(2))
    return out


def has_section(text, name):
    return any(name.lower() in h.lower() for h in headings_of(text))


def resolve(root, files, citing, ref):
    """The repository path `ref` names from file `citing`, or None."""
    for base in (os.path.dirname(citing), ''):
        p = os.path.normpath(os.path.join(base, ref))
        if not p.startswith('..') and not os.path.isabs(p) and (p in files or os.path.isdir(
                os.path.join(root, p))):
            return p
    return None


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))
    files = set(repo_files(root))
    texts = {}

    def text_of(path):
        if path not in texts:
            texts[path] = read_text(os.path.join(root, path)) or ''
        return texts[path]

    bad = []
    for f in sorted(files):
        if f.endswith(SKIP_EXT):
            continue
        text = text_of(f)
        if not text:
            continue
        is_md = f.endswith('.md')
        lines = text.splitlines()
        for no, line in enumerate(lines, 1):
            where = '%s:%d' % (f, no)
            nxt = lines[no] if no < len(lines) else ''
            joined = line + ' ' + COMMENT_LEAD.sub('', nxt, count=1)
            link_spans = []
            if is_md:
                for m in MD_LINK.finditer(line):
                    link_spans.append(m.span(1))
                    target = m.group(1)
                    if re.match(r'^[a-z][a-z0-9+.-]*:', target):  # http:, mailto:
                        continue
                    path, _, anchor = target.partition('#')
                    dest = f if not path else resolve(root, files, f, path)
                    if dest is None:
                        bad.append('%s: link to %s, which is not in this repository' %
                                   (where, path))
                        continue
                    if anchor and dest.endswith('.md') and anchor not in anchors_of(
                            text_of(dest)):
                        bad.append('%s: link to %s#%s: no such heading in %s' %
                                   (where, path or f, anchor, dest))
            for m in MD_NAME.finditer(line):
                if any(a <= m.start(1) < b for a, b in link_spans):
                    continue  # checked as a link above
                word_start = max(line.rfind(' ', 0, m.start(1)), line.rfind('(', 0, m.start(1)))
                if '://' in line[word_start + 1:m.end(1)]:
                    continue  # part of a URL
                dest = resolve(root, files, f, m.group(1))
                if dest is None:
                    bad.append('%s: %s is not in this repository' % (where, m.group(1)))
                    continue
                s = SECTION_AFTER.match(joined[m.end(1):])
                if s and not has_section(text_of(dest), s.group(1)):
                    bad.append('%s: %s has no section "%s"' % (where, dest, s.group(1)))
            for m in README_SECTION.finditer(joined):
                if m.start() >= len(line):
                    break  # the next line's own
                if not has_section(text_of('README.md'), m.group(1)):
                    bad.append('%s: README.md has no section "%s"' % (where, m.group(1)))
    if bad:
        print('dangling document references (point them at a file in this repository, '
              'e.g. a page under docs/):')
        for b in bad:
            print('  ' + b)
        return 1
    print('doc refs: every cited document is in the repository (%d files scanned)' % len(files))
    return 0


if __name__ == '__main__':
    sys.exit(main())
