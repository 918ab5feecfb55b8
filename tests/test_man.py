#!/usr/bin/env python3
"""The man pages say what --help says.

Renders every generated page (man -l, or groff -man -Tutf8; skips when
neither is installed), fails on roff warnings, and checks that
 * there is a page for every command `htr --help` lists, and libhtr(3);
 * every option `htr CMD --help` lists (its option lines and its usage)
   appears in htr-CMD(1), and every word of the help text appears in it.
Usage: test_man.py HTR MANDIR
"""
import os
import re
import shutil
import subprocess
import sys

htr, mandir = sys.argv[1], sys.argv[2]
failed = 0


def fail(msg):
    global failed
    failed += 1
    print('not ok:', msg)


man, groff = shutil.which('man'), shutil.which('groff')
if not man and not groff:
    print('SKIP: neither man nor groff is installed to render the pages')
    sys.exit(77)


def render(page):
    env = dict(os.environ, MANWIDTH='100', LC_ALL='C.UTF-8', MANPAGER='cat',
               PAGER='cat')
    if groff:
        w = subprocess.run([groff, '-man', '-Tutf8', '-ww', '-z', page],
                           stderr=subprocess.PIPE, universal_newlines=True)
        if w.returncode or w.stderr.strip():
            fail('%s: groff: %s' % (page, w.stderr.strip()))
    cmd = [man, '-l', page] if man else [groff, '-man', '-Tutf8', page]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=env, universal_newlines=True)
    if p.returncode:
        fail('%s: %s: %s' % (page, cmd[0], p.stderr.strip()))
    text = re.sub(r'.\x08', '', p.stdout)            # overstrikes
    text = re.sub(r'\x1b\[[0-9;]*m', '', text)       # SGR
    for a, b in (('\u2010', '-'), ('\u2011', '-'), ('\u2212', '-'),
                 ('\u2018', "'"), ('\u2019', "'"), ('\u201c', '"'),
                 ('\u201d', '"'), ('\u00b4', "'"), ('\u2022', '*')):
        text = text.replace(a, b)
    return text


def helptext(args):
    p = subprocess.run([htr] + args + ['--help'], stdout=subprocess.PIPE,
                       universal_newlines=True)
    if p.returncode:
        fail('htr %s --help: exit %d' % (' '.join(args), p.returncode))
    return p.stdout


def options(help):
    """Every -x and --long of the option lines and the usage."""
    opts = set(re.findall(r'(?<![\w/-])--[A-Za-z0-9][\w-]*', help))
    for line in help.split('\n'):
        if re.match(r'^ {2,6}-', line):
            spec = re.split(r' {2,}', line.strip())[0]
            opts |= set(re.findall(r'(?<![\w-])-[A-Za-z0-9](?![\w-])', spec))
    return opts


def words(text):
    return set(w.strip('.,;:()[]"\'') for w in text.split()) - {''}


cmds = [l.split()[0] for l in
        re.search(r'commands:\n((?:  .*\n)+)', helptext([])).group(1)
        .rstrip('\n').split('\n')]
pages = sorted(os.listdir(mandir))
want = sorted(['htr.1', 'libhtr.3'] + ['htr-%s.1' % c for c in cmds])
missing = set(want) - set(pages)
if missing:
    fail('no page for %s' % ' '.join(sorted(missing)))

page = os.path.join(mandir, 'htr.1')
if os.path.exists(page):
    text = render(page)
    for c in cmds:
        if 'htr-%s(1)' % c not in text:
            fail('htr(1) does not name htr-%s(1)' % c)
    for o in ('--help', '--version'):
        if not re.search(r'(?<![\w-])%s(?![\w-])' % o, text):
            fail('htr(1) lacks %s' % o)

for c in cmds:
    page = os.path.join(mandir, 'htr-%s.1' % c)
    if not os.path.exists(page):
        continue
    text, help = render(page), helptext([c])
    if not re.search(r'NAME\s+htr-%s - ' % c, text):
        fail('htr-%s(1): no NAME line' % c)
    opts = options(help)
    for o in sorted(opts):
        if not re.search(r'(?<![\w-])%s(?![\w-])' % re.escape(o), text):
            fail('htr-%s(1) lacks %s' % (c, o))
    lost = words(help.replace('usage:', '').replace('exit status:', '')) \
        - words(text)
    if lost:
        fail('htr-%s(1) lacks the words %s of --help' % (c, sorted(lost)))
    for s in ('SYNOPSIS', 'DESCRIPTION', 'OPTIONS', 'EXIT STATUS',
              'SEE ALSO'):
        if not re.search(r'^%s$' % s, text, re.M):
            fail('htr-%s(1) has no %s section' % (c, s))
    if not failed:
        print('ok: htr-%s(1): %d options, every word of --help' %
              (c, len(opts)))

page = os.path.join(mandir, 'libhtr.3')
if os.path.exists(page):
    text = render(page)
    for s in ('pkg-config --cflags --libs htr', 'htr_store_open',
              'htr/build.h', 'htr/tree.h', 'HTR_ERR_USER'):
        if s not in text:
            fail('libhtr(3) lacks %s' % s)
    print('ok: libhtr(3)')

if failed:
    print('%d failures' % failed)
    sys.exit(1)
print('man: all checks passed')
