#!/usr/bin/env python3
"""The layering of lib/, checked from the compiled objects.

usage: layers.py LIBHTR_INTERNAL.a SOURCE_ROOT

1. No circle of calls between lib/ files: every object of the archive
   names the symbols it defines and the ones it needs (nm); a file that
   needs a symbol another defines calls it.  A circle (a strongly
   connected set of more than one file) is printed with the names that
   tie it, and the check fails.  Calls through function pointers (the
   analyzer descriptors) are not seen, by design: they are the seam.
2. tools/htr/ and plugins/ include no lib/ internal header: the CLI and
   the LLDB plugin are built on the public libhtr alone.

Exit 0 when both hold, 1 otherwise (the reason on stdout).
"""
import collections
import os
import re
import subprocess
import sys


def objects(archive):
    """{object: (defined symbols, needed symbols)} from nm -A."""
    out = subprocess.run(['nm', '-A', archive], capture_output=True,
                         text=True, check=True).stdout
    files = collections.defaultdict(lambda: (set(), set()))
    for line in out.splitlines():
        name, _, rest = line.rpartition(':')
        # "archive:member.o" or, for a thin archive, a path to the member
        obj = os.path.basename(name.split(':')[-1])
        obj = obj[:-2] if obj.endswith('.o') else obj
        parts = rest.split()
        if len(parts) == 3 and parts[1] in 'TDBRCVW':
            files[obj][0].add(parts[2])
        elif len(parts) == 2 and parts[0] == 'U':
            files[obj][1].add(parts[1])
    return files


def circles(graph):
    """Strongly connected sets of more than one node (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                found.append(sorted(scc))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def check_calls(archive):
    files = objects(archive)
    owner = {}
    for obj, (defs, _) in files.items():
        for s in defs:
            owner[s] = obj
    graph = collections.defaultdict(set)
    why = collections.defaultdict(set)
    for obj, (_, needs) in files.items():
        graph[obj]
        for s in needs:
            o = owner.get(s)
            if o and o != obj:
                graph[obj].add(o)
                why[(obj, o)].add(s)
    bad = circles(graph)
    for scc in bad:
        print('circle of calls: ' + ', '.join(scc))
        for a in scc:
            for b in scc:
                if (a, b) in why:
                    print('  %s -> %s: %s' % (a, b, ', '.join(sorted(why[(a, b)]))))
    edges = sum(len(v) for v in graph.values())
    print('%d lib/ files, %d file-to-file call edges, %d circles'
          % (len(graph), edges, len(bad)))
    return not bad


def check_includes(root):
    internal = {f for f in os.listdir(os.path.join(root, 'lib'))
                if f.endswith('.h')}
    ok = True
    inc = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
    for top in ('tools/htr', 'plugins'):
        for d, _, names in os.walk(os.path.join(root, top)):
            for n in names:
                if not n.endswith(('.c', '.h', '.cpp', '.hpp')):
                    continue
                path = os.path.join(d, n)
                with open(path, errors='replace') as f:
                    for no, line in enumerate(f, 1):
                        m = inc.match(line)
                        if not m:
                            continue
                        h = m.group(1)
                        local = os.path.exists(os.path.join(d, h))
                        if not local and os.path.basename(h) in internal:
                            print('%s:%d: includes lib/%s, an internal header'
                                  % (os.path.relpath(path, root), no, h))
                            ok = False
    return ok


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    calls = check_calls(sys.argv[1])
    incs = check_includes(sys.argv[2])
    return 0 if calls and incs else 1


if __name__ == '__main__':
    sys.exit(main())
