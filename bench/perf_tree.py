#!/usr/bin/env python3
"""`perf_tree.py PERF_SCRIPT FRAME [DEPTH]`: of the samples in a `perf script`
output (taken with `-g`), those whose call stack passes through a frame
containing FRAME, broken down by the DEPTH frames right below it (its callees),
as shares of all samples. `(self)` is time in FRAME itself.

    python3 bench/perf_tree.py /tmp/mmc-profile/perf.txt 'vm::assert_ready' 2

`perf_tree.py PERF_SCRIPT --callers`: each sample by the innermost frame of our
code or of the runtime under it (the host, storage, tokio, hyper, mio), and
whether the kernel preempted it there or it went to sleep — for
`sched:sched_switch` profiles: where threads block or lose their core.
"""
import collections
import re
import signal
import sys


def stacks(path):
    """Each sample's frames, innermost first."""
    frames = []
    with open(path, errors="replace") as f:
        for line in f:
            if not line.strip():
                if frames:
                    yield frames
                frames = []
            elif line[0] in " \t":
                parts = line.strip().split(None, 1)
                if len(parts) == 2:
                    # "addr symbol+0xoff (dso)" -> "symbol"
                    frames.append(re.sub(r"\+0x[0-9a-f]+$", "", parts[1].split(" (")[0]))
            elif frames:  # a sample header right after another sample's frames
                yield frames
                frames = []
    if frames:
        yield frames


OURS = ("mmc_", "tokio::runtime", "hyper::", "mio::")


def by_caller(path):
    total, where = 0, collections.Counter()
    for frames in stacks(path):
        total += 1
        how = "preempted" if any("exit_to_user_mode" in f or "irqentry_exit" in f for f in frames) else "asleep"
        ours = next((f for f in frames if f.lstrip("<&").startswith(OURS)), "(elsewhere)")
        where[(how, ours[:100])] += 1
    print(f"{total} samples")
    for (how, f), n in where.most_common(30):
        print(f"{100 * n / total:6.2f}%  {how:9}  {f}")


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quietly, when piped to `head`
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    path, frame = sys.argv[1], sys.argv[2]
    if frame == "--callers":
        return by_caller(path)
    depth = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    total, inside, below = 0, 0, collections.Counter()
    for frames in stacks(path):
        total += 1
        for i, f in enumerate(frames):
            if frame in f:
                inside += 1
                callees = frames[max(0, i - depth):i][::-1]
                below[" > ".join(c[:80] for c in callees) or "(self)"] += 1
                break
    if not total:
        sys.exit("no samples")
    print(f"{inside} of {total} samples pass through {frame!r} ({100 * inside / total:.1f}%)")
    for callees, n in below.most_common(40):
        print(f"{100 * n / total:6.2f}%  {callees}")


if __name__ == "__main__":
    main()
