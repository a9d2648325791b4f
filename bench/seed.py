"""Seeds N synthetic payments straight into the collect component's tables
(same key layout as components/collect/src/store.rs), to measure reads with a
large store without spending minutes creating them through the API.

Usage: seed.py DB MERCHANT N [FIRST]: payments FIRST..FIRST+N-1 (references
seed-FIRST…); prints the id of the first one. Payment i is created at
T0 + 10 ms * i with a UUIDv7 id of that time, as collect makes them, so the
payments table is in creation order and created[gte|lt] ranges work. Every
tenth payment failed, the rest completed; each has its `listing` entry (the
index of the list's status/operator/country filters) and its two `search`
entries (its lowercased reference, its phone's digits reversed), and both
indexes are marked complete as the collect job marks them after a backfill. Records are in
collect's binary form (crates/domain/src/record.rs, version 1; `record()`
below writes the fields it needs in that layout). The console overview's
tallies are not written here: `mmc console rebuild-overview` counts them
from these records afterwards, as it would for any store."""
import os, sqlite3, sys

T0_MS = 1780272000000
STEP_MS = 10


STATUS = {"completed": 4, "failed": 5}  # mmc_domain::Status variant indexes


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def text(s):
    b = s.encode()
    return varint(len(b)) + b


def some(v):
    """An Option: None, or already encoded bytes."""
    return b"\x00" if v is None else b"\x01" + v


def record(r):
    """A payment in the layout of `mmc_domain::record` version 1: its fields
    in declaration order; the ones the seed does not set are empty."""
    f = r["failure"]
    return b"".join([
        b"\x01", text(r["id"]), text(r["merchant_id"]), text(r["environment"]),
        text(r["reference"]), varint(STATUS[r["status"]]), varint(r["amount"]),
        text(r["currency"]), text(r["country"]), varint(0),  # mode: direct
        some(text(r["operator"])),
        some(some(text(r["customer"]["phone"])) + some(None) + some(None)),
        some(None), some(None), some(None), some(None),  # description .. metadata
        some(text(r["psp_reference"])), some(None),  # psp_reference, checkout_url
        varint(r["expires_at_ms"]), varint(r["created_at_ms"]), varint(r["updated_at_ms"]),
        some(None if r["completed_at_ms"] is None else varint(r["completed_at_ms"])),
        some(None if f is None else text(f["code"]) + text(f["message"])),
        varint(0), varint(0), text(r["request_hash"]), varint(0),  # otp, refunded, hash, reserved
        varint(0), some(None), text(r["merchant_name"]),  # generation, cancel_reason, name
        some(None), varint(0), some(None), some(None), some(None),  # next_check .. sent_at
        b"\x00", some(None),  # unsent, late_success_from
    ])


# Every seeded payment's customer phone, as the search index keys it.
PHONE_REVERSED = "2290166001234"[::-1]


def uuid7(ms):
    """A UUIDv7 (RFC 9562) of time `ms`: 48 bits of time, version, random."""
    b = bytearray(ms.to_bytes(6, "big") + os.urandom(10))
    b[6] = 0x70 | (b[6] & 0x0F)
    b[8] = 0x80 | (b[8] & 0x3F)
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def main():
    db, merchant, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    first = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    first_id = None
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA synchronous=OFF")
    proto = {
        "merchant_id": merchant, "environment": "test", "status": "completed", "amount": 1500,
        "currency": "XOF", "country": "BJ", "mode": "direct", "operator": "mtn-bj",
        "customer": {"phone": "+2290166001234", "first_name": None, "last_name": None},
        "description": None, "callback_url": None, "external_merchant_id": None, "metadata": None,
        "psp_reference": "sim-1234-0-x", "checkout_url": None, "expires_at_ms": 1780272900000,
        "created_at_ms": 1780272000000, "updated_at_ms": 1780272000000, "completed_at_ms": 1780272001000,
        "failure": None, "request_hash": "seed", "merchant_name": "Bench",
    }
    batch = []
    for i in range(first, first + n):
        created = T0_MS + STEP_MS * i
        pid = uuid7(created)
        first_id = first_id or pid
        rec = dict(proto, id=pid, reference=f"seed-{i}", created_at_ms=created,
                   updated_at_ms=created + 1000, completed_at_ms=created + 1000,
                   expires_at_ms=created + 900000)
        if i % 10 == 0:
            rec.update(status="failed", completed_at_ms=None,
                       failure={"code": "insufficient_funds", "message": "Insufficient funds."})
        batch.append(("collect", "payments", f"test/{merchant}/{pid}", record(rec)))
        batch.append(("collect", "refs", f"test/{merchant}/seed-{i}", pid.encode()))
        batch.append(("collect", "listing", f"test/{merchant}/{rec['status']}/BJ/mtn-bj/{pid}", b""))
        # The search index: the lowercased reference, the phone's digits reversed.
        batch.append(("collect", "search", f"test/{merchant}/r/seed-{i}/{pid}", b""))
        batch.append(("collect", "search", f"test/{merchant}/p/{PHONE_REVERSED}/{pid}", b""))
        if len(batch) >= 20000:
            conn.executemany("INSERT OR REPLACE INTO kv (ns, tbl, k, v) VALUES (?, ?, ?, ?)", batch)
            conn.commit()
            batch = []
    batch.append(("collect", "meta", "listing-v2", b"ready"))  # crates/domain/src/payment.rs
    batch.append(("collect", "meta", "search-v1", b"ready"))
    conn.executemany("INSERT OR REPLACE INTO kv (ns, tbl, k, v) VALUES (?, ?, ?, ?)", batch)
    conn.commit()
    print(first_id)


if __name__ == "__main__":
    main()
