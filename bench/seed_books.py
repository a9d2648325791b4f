"""Seeds one UTC day of N test payments through the simulator, and the
simulator's books of that day, straight into a store: what the books'
benchmark reconciles.

Usage: seed_books.py (--sqlite DB | --postgres URL) MERCHANT N DAY_MS

Payment i is created at DAY_MS + i * 86_400_000 / N with a UUIDv7 id of that
time (as collect makes them), completed, 1500 XOF, routed through the
`simulator` adapter (record version 3: collect's binary form with its
route, see crates/domain/src/record.rs); the simulator's journal holds, for
each, the collection it executed with its 1 % fee, in rows of 1000 entries
as the host's journal capability writes them (crates/capabilities/src/
journal.rs). Every record therefore matches. PostgreSQL rows go in by COPY.
"""
import os
import sqlite3
import subprocess
import sys

from seed import PHONE_REVERSED, record, text, uuid7, varint

ROUTE = b"\x00" + b"\x01" + text("simulator") + text("{}") + varint(0)  # review none, route


def payment(merchant, pid, i, created):
    rec = {
        "id": pid, "merchant_id": merchant, "environment": "test", "reference": f"books-{i}",
        "status": "completed", "amount": 1500, "currency": "XOF", "country": "BJ",
        "operator": "mtn-bj", "customer": {"phone": "+2290166001234"},
        "psp_reference": f"sim-1234-{created}-{pid}", "expires_at_ms": created + 900000,
        "created_at_ms": created, "updated_at_ms": created + 1000,
        "completed_at_ms": created + 1000, "failure": None, "request_hash": "seed",
        "merchant_name": "Bench",
    }
    v1 = record(rec)
    return b"\x03" + v1[1:] + ROUTE


def journal_row(entries):
    out = bytearray()
    for at, body in entries:
        out += at.to_bytes(8, "little") + len(body).to_bytes(4, "little") + body
    return bytes(out)


def rows(merchant, n, day_ms):
    """(ns, table, key, value) of every payment, its reference and index
    entries, and the journal's rows."""
    entries = []
    step = 86_400_000 / n
    for i in range(n):
        created = day_ms + int(i * step)
        pid = uuid7(created)
        yield ("collect", "payments", f"test/{merchant}/{pid}", payment(merchant, pid, i, created))
        yield ("collect", "refs", f"test/{merchant}/books-{i}", pid.encode())
        # Its indexes, as a create writes them: the list's filters, the
        # lowercased reference and the phone's digits reversed.
        yield ("collect", "listing", f"test/{merchant}/completed/BJ/mtn-bj/{pid}", b"")
        yield ("collect", "search", f"test/{merchant}/r/books-{i}/{pid}", b"")
        yield ("collect", "search", f"test/{merchant}/p/{PHONE_REVERSED}/{pid}", b"")
        entries.append((created, f"c {pid} 1500 XOF 15 {created}".encode()))
        if len(entries) == 1000 or i == n - 1:
            key = f"{entries[0][0]:013}/bench{i:08}"
            yield ("simulator", "journal", key, journal_row(entries))
            entries = []
    # Both indexes hold every payment (crates/domain/src/payment.rs): no
    # backfill runs beside the reconciliation.
    yield ("collect", "meta", "listing-v2", b"ready")
    yield ("collect", "meta", "search-v1", b"ready")


def to_sqlite(path, merchant, n, day_ms):
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA synchronous=OFF")
    batch = []
    for row in rows(merchant, n, day_ms):
        batch.append(row)
        if len(batch) >= 20000:
            conn.executemany("INSERT OR REPLACE INTO kv (ns, tbl, k, v) VALUES (?, ?, ?, ?)", batch)
            conn.commit()
            batch = []
    conn.executemany("INSERT OR REPLACE INTO kv (ns, tbl, k, v) VALUES (?, ?, ?, ?)", batch)
    conn.commit()


def to_postgres(url, merchant, n, day_ms):
    copy = subprocess.Popen(
        ["psql", url, "-qc", "COPY kv (ns, tbl, k, v) FROM STDIN"],
        stdin=subprocess.PIPE)
    for ns, tbl, key, value in rows(merchant, n, day_ms):
        line = f"{ns}\t{tbl}\t\\\\x{key.encode().hex()}\t\\\\x{value.hex()}\n"
        copy.stdin.write(line.encode())
    copy.stdin.close()
    if copy.wait() != 0:
        sys.exit("COPY failed")


if __name__ == "__main__":
    where, target, merchant, n, day_ms = sys.argv[1:6]
    sys.path.insert(0, os.path.dirname(__file__))
    if where == "--sqlite":
        to_sqlite(target, merchant, int(n), int(day_ms))
    else:
        to_postgres(target, merchant, int(n), int(day_ms))
