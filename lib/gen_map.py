#!/usr/bin/env python3
"""Write libhtr's linker version script from the public headers.

usage: gen_map.py OUT HEADER...

Every function a header declares with HTR_API is listed by name under one
version node; everything else is local.  A pattern such as htr_* cannot
keep internals like htr_tb__run out (a version script has no way to say
"but not with __"), so the list is explicit, and it cannot drift from the
headers because it is made from them at each build.  The node, HTR_0,
is the 0.x series' and the promise that goes with it is in
docs/embedding.md ("ABI").
"""
import re
import sys

NODE = "HTR_0"
names = set()
decl = re.compile(r"\bHTR_API\b[^;{]*?\b(htr_[A-Za-z0-9_]+)\s*\(", re.S)
for path in sys.argv[2:]:
    with open(path) as f:
        text = re.sub(r"/\*.*?\*/", " ", f.read(), flags=re.S)
    for m in decl.finditer(text):
        if "__" in m.group(1):
            sys.exit("gen_map.py: %s: internal name %s declared HTR_API" %
                     (path, m.group(1)))
        names.add(m.group(1))
if not names:
    sys.exit("gen_map.py: no HTR_API declarations found")
with open(sys.argv[1], "w") as out:
    out.write("/* Made by lib/gen_map.py from include/htr/*.h. */\n")
    out.write("%s {\n\tglobal:\n" % NODE)
    for n in sorted(names):
        out.write("\t\t%s;\n" % n)
    out.write("\tlocal:\n\t\t*;\n};\n")
