"""The console under abuse, for `make bench`: SIGN_INS connections sending
bad sign-ins (each for an email of its own, so no account's limit stops
them before the password check would) and UPLOADS connections sending
anonymous 1 MiB uploads slowly (a kilobyte at a time), for SECONDS, from
addresses spread over 127.0.0.2-127.0.0.201 (so neither the per-client
connection cap nor the per-client sign-in limit turns them away before the
console sees them). Meanwhile it samples the server's resident memory.

Prints one line: "peak_rss_kib|sign-ins answered by status|uploads answered by status".

Usage: console_abuse.py BASE_URL SERVER_PID SIGN_INS UPLOADS SECONDS"""
import asyncio, collections, re, resource, sys, time, urllib.parse, urllib.request

# A thousand connections at once: more than the usual soft limit of files.
_, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
base, pid = sys.argv[1], int(sys.argv[2])
sign_ins, uploads, seconds = int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
url = urllib.parse.urlsplit(base)
host, port = url.hostname, url.port
SOURCES = [f"127.0.0.{i}" for i in range(2, 202)]
MIB = 1024 * 1024
# Between one answer and a connection's next request: the load stays the
# abuse's, not this script's own CPU.
PAUSE = 0.2

# The sign-in form's token and its cookie, read once.
page = urllib.request.urlopen(base + "/console/sign-in")
cookie = page.headers["set-cookie"].split(";")[0]
pre = re.search(r'name="pre" value="([^"]+)"', page.read().decode()).group(1)

answered = {"sign-in": collections.Counter(), "upload": collections.Counter()}
deadline = time.monotonic() + seconds


async def status_of(reader):
    """The status of an answer; the connection is closed after it."""
    head = await reader.readuntil(b"\r\n\r\n")
    return head.split(b" ", 2)[1].decode()


async def sign_in(n):
    i = 0
    while time.monotonic() < deadline:
        i += 1
        form = urllib.parse.urlencode(
            {"pre": pre, "email": f"nobody{n}-{i}@abuse.bj", "password": f"wrong guess {i}"}
        ).encode()
        req = (
            f"POST /console/sign-in HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
            f"Cookie: {cookie}\r\nContent-Type: application/x-www-form-urlencoded\r\n"
            f"Content-Length: {len(form)}\r\n\r\n"
        ).encode() + form
        try:
            r, w = await asyncio.open_connection(host, port, local_addr=(SOURCES[n % len(SOURCES)], 0))
            w.write(req)
            await w.drain()
            answered["sign-in"][await status_of(r)] += 1
            w.close()
        except (OSError, asyncio.IncompleteReadError):
            answered["sign-in"]["closed"] += 1
        await asyncio.sleep(PAUSE)


async def upload(n):
    chunk = b"x" * 1024
    while time.monotonic() < deadline:
        head = (
            f"POST /console/bulk/upload HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
            f"Content-Type: multipart/form-data; boundary=abuse\r\nContent-Length: {MIB}\r\n\r\n"
        ).encode()
        try:
            r, w = await asyncio.open_connection(host, port, local_addr=(SOURCES[n % len(SOURCES)], 0))
            w.write(head)
            answer = asyncio.ensure_future(status_of(r))
            sent = 0
            # A kilobyte every 100 ms until the whole MiB is sent or answered.
            while sent < MIB and not answer.done() and time.monotonic() < deadline:
                w.write(chunk)
                await w.drain()
                sent += len(chunk)
                await asyncio.wait([answer], timeout=0.1)
            answered["upload"][await answer if answer.done() else "unanswered"] += 1
            if not answer.done():
                answer.cancel()
            w.close()
        except (OSError, asyncio.IncompleteReadError):
            answered["upload"]["closed"] += 1
        await asyncio.sleep(PAUSE)


def rss_kib():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def sample(peak):
    while time.monotonic() < deadline:
        peak[0] = max(peak[0], rss_kib())
        await asyncio.sleep(0.05)


async def main():
    peak = [rss_kib()]
    tasks = [sign_in(n) for n in range(sign_ins)] + [upload(n) for n in range(uploads)]
    await asyncio.gather(sample(peak), *tasks)
    peak[0] = max(peak[0], rss_kib())
    fmt = lambda c: " ".join(f"{k}:{v}" for k, v in sorted(c.items()))
    print(f"{peak[0]}|{fmt(answered['sign-in'])}|{fmt(answered['upload'])}")


asyncio.run(main())
