#!/usr/bin/env python3
"""Names Wasm code in callgrind's output: `???:0xADDR` becomes
`component:function`, from the server's memory map (MAPS, a copy of
/proc/PID/maps) and the symbol tables of the compiled components it maps
(`*.cwasm`, ELF files whose text wasmtime maps in place). Reads stdin,
writes stdout. Used by bench/callgrind.sh."""

import bisect
import functools
import re
import signal
import subprocess
import sys


def mappings(maps_path):
    """(start, end, file offset, path) of each executable .cwasm mapping."""
    out = []
    for line in open(maps_path):
        parts = line.split()
        if len(parts) >= 6 and "x" in parts[1] and parts[5].endswith(".cwasm"):
            start, end = (int(x, 16) for x in parts[0].split("-"))
            out.append((start, end, int(parts[2], 16), parts[5]))
    return out


def symbols(path):
    """Sorted (file offset, name) of the functions in a .cwasm's text."""
    sections = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True).stdout
    text = re.search(r"\]\s+\.text\s+\S+\s+([0-9a-f]+)\s+([0-9a-f]+)", sections)
    base = int(text.group(2), 16) - int(text.group(1), 16)
    syms = []
    for line in subprocess.run(["readelf", "-sW", path], capture_output=True, text=True).stdout.splitlines():
        f = line.split(None, 7)
        if len(f) == 8 and f[3] == "FUNC":
            name = f[7].split("::", 2)[-1]
            syms.append((int(f[1], 16) + base, name))
    syms.sort()
    return syms


@functools.cache
def demangle(name):
    if name.startswith("_ZN"):
        name = subprocess.run(["c++filt", name], capture_output=True, text=True).stdout.strip()
        name = re.sub(r"::h[0-9a-f]{16}$", "", name)
        for a, b in (("$LT$", "<"), ("$GT$", ">"), ("$u20$", " "), ("$RF$", "&"), ("..", "::")):
            name = name.replace(a, b)
    return name


def main():
    maps = mappings(sys.argv[1])
    tables = {}
    pattern = re.compile(r"\?\?\?:0x([0-9a-f]+)")

    def name(m):
        addr = int(m.group(1), 16)
        for start, end, offset, path in maps:
            if start <= addr < end:
                syms = tables.setdefault(path, symbols(path))
                i = bisect.bisect_right(syms, (addr - start + offset, "\uffff")) - 1
                component = path.rsplit("/", 1)[-1].split("-", 1)[0]
                return f"{component}:{demangle(syms[i][1]) if i >= 0 else '?'}"
        return m.group(0)

    for line in sys.stdin:
        sys.stdout.write(pattern.sub(name, line))


# A reader that stops early (head) is not an error.
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
main()
