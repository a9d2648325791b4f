#!/usr/bin/env python3
"""What fills the SQLite WAL: `wal_mix.py DB WAL` counts the WAL's frames
(one frame = one 4 KiB page written at a commit) by the B-tree each page
belongs to, and, for the components' `kv` table, by its (namespace, table)
prefix, read from the first key on the page. Takes copies of the database
and WAL files taken while the server ran (see bench/wal_mix.sh); the live
files are never opened.

Only the frames of the WAL's current generation count (those whose salt
matches the header's): what the writer appended since the WAL last restarted.
"""
import collections
import os
import shutil
import sqlite3
import struct
import sys
import tempfile


def frames_of(wal_path):
    data = open(wal_path, "rb").read()
    _magic, _ver, page_size, _seq, salt1, salt2, _c1, _c2 = struct.unpack(">8I", data[:32])
    off, frames = 32, []
    while off + 24 + page_size <= len(data):
        pgno, commit, s1, s2, _k1, _k2 = struct.unpack(">6I", data[off : off + 24])
        if (s1, s2) != (salt1, salt2):
            break  # an older generation's frames, left behind by a restart
        frames.append((pgno, commit != 0, data[off + 24 : off + 24 + page_size]))
        off += 24 + page_size
    return frames


def btree_of_page(db_path, wal_path):
    """Page number -> B-tree name, from `dbstat` on a private copy (database
    and WAL together, so the pages the WAL holds are seen as they are there)."""
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "snap.db")
        shutil.copy(db_path, db)
        shutil.copy(wal_path, db + "-wal")
        con = sqlite3.connect(db)
        try:
            return dict(con.execute("SELECT pageno, name FROM dbstat"))
        finally:
            con.close()


def varint(b, i):
    v = 0
    for j in range(8):
        c = b[i + j]
        v = (v << 7) | (c & 0x7F)
        if c < 0x80:
            return v, i + j + 1
    return (v << 8) | b[i + 8], i + 9


def kv_prefix(page, pgno):
    """`ns/tbl` of the first cell of a `kv` index page (WITHOUT ROWID: an
    index B-tree whose record starts ns, tbl, k), or None."""
    hdr = 100 if pgno == 1 else 0
    kind = page[hdr]
    if kind not in (0x0A, 0x02):  # index leaf, index interior
        return None
    if struct.unpack(">H", page[hdr + 3 : hdr + 5])[0] == 0:
        return "(empty page)"
    header_size = 8 if kind == 0x0A else 12
    cell = struct.unpack(">H", page[hdr + header_size : hdr + header_size + 2])[0]
    i = cell + (4 if kind == 0x02 else 0)  # an interior cell starts with its child
    _payload, rec = varint(page, i)
    header_len, j = varint(page, rec)
    types = []
    while j < rec + header_len:
        t, j = varint(page, j)
        types.append(t)
    vals, p = [], rec + header_len
    for t in types[:2]:
        if t < 13 or t % 2 == 0:
            return None  # not text: not a kv key
        n = (t - 13) // 2
        vals.append(page[p : p + n].decode("utf-8", "replace"))
        p += n
    return "/".join(vals) + ("" if kind == 0x0A else " (interior)")


def main():
    db_path, wal_path = sys.argv[1], sys.argv[2]
    frames = frames_of(wal_path)
    commits = sum(1 for _, c, _ in frames if c)
    names = btree_of_page(db_path, wal_path)
    counts = collections.Counter()
    for pgno, _, page in frames:
        name = names.get(pgno, "(freed or new)")
        if name == "kv":
            name = f"kv {kv_prefix(page, pgno)}"
        counts[name] += 1
    total = max(len(frames), 1)
    print(f"{len(frames)} frames in {commits} commits ({len(frames) / max(commits, 1):.1f} pages a commit)")
    print("| B-tree (kv: namespace/table) | frames | share |")
    print("|---|---|---|")
    for name, n in counts.most_common():
        print(f"| {name} | {n} | {100 * n / total:.1f}% |")


if __name__ == "__main__":
    main()
