#!/usr/bin/env python3
"""Where a GPU step's wall time goes: busy, and idle between kernels, from a zt_gpu_trace file.

Reads the tab-separated records of bench/trace/zt_gpu_trace.cpp (kind, start ns, end ns, stream,
correlation, name), cuts the device records into steps at each kernel whose name matches --marker
(the first kernel of a step, e.g. the embedding gather), drops the first --skip steps (warm-up)
and the last one (it runs to the end of the trace, the program's teardown included), and prints
per step: span, busy (the union of kernel / memcpy / memset intervals over all streams, clipped to
the step's window), idle, and the idle the host caused (the part of a gap before the launching
API call of the work after it began: the host was late). Then the largest idle sources summed over the
kept steps, by (work before, work after), with the host-late share, and the host's time in
synchronising calls per step.

Usage: gpu_trace_summary.py TRACE.tsv [--marker REGEX] [--skip N] [--top K]
Exit status 1 when the file has no device records or no step marker (a check that cannot pass
silently).
"""

import argparse
import collections
import re
import sys


def short(name: str) -> str:
    """A kernel name without its return type, template arguments and parameters."""
    s = name.replace("(anonymous namespace)::", "")
    if s.startswith("void "):
        s = s[5:]
    out, depth = [], 0
    for ch in s:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            if ch == "(":
                break
            out.append(ch)
    s = "".join(out).strip()
    for prefix in ("zt::cuda::attn::", "zt::cuda::"):
        s = s.replace(prefix, "")
    return s[:80]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--marker", default="embedding_fwd", help="regex: the first kernel of a step")
    ap.add_argument("--skip", type=int, default=1, help="steps to drop first (warm-up)")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()

    dev, api, syncs = [], {}, []
    with open(args.trace) as f:
        for ln, line in enumerate(f, 1):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 6:
                print(f"{args.trace}:{ln}: expected 6 tab-separated fields, got {len(parts)}",
                      file=sys.stderr)
                return 1
            kind, start, end, stream, corr, name = parts
            start, end, corr = int(start), int(end), int(corr)
            if kind in ("kernel", "memcpy", "memset"):
                dev.append((start, end, kind, int(stream), corr, name))
            elif kind == "api":
                api[corr] = (start, end, name)
                if "ynchronize" in name:
                    syncs.append((start, end, name))
    if not dev:
        print(f"{args.trace}: no device records", file=sys.stderr)
        return 1
    dev.sort()
    marker = re.compile(args.marker)
    starts = [i for i, r in enumerate(dev) if r[2] == "kernel" and marker.search(r[5])]
    # A step's first kernel: every match begins a step unless another match started less than
    # 100 µs before it (a marker kernel launched twice in a row belongs to one step).
    firsts = []
    for i in starts:
        if not firsts or dev[i][0] - dev[firsts[-1]][0] >= 100_000:
            firsts.append(i)
    if len(firsts) <= args.skip + 1:
        print(f"{args.trace}: {len(firsts)} steps found by --marker {args.marker!r}, "
              f"--skip {args.skip}", file=sys.stderr)
        return 1
    # Step windows: step s is [its first record's start, the next step's first record's start);
    # the last one ends where the last work ends. Everything below is clipped to the windows, so a
    # kernel on another stream that runs past the next step's marker counts in both, each its part.
    end_all = max(r[1] for r in dev[firsts[0]:])
    bounds = [dev[i][0] for i in firsts] + [end_all]
    nsteps = len(firsts)

    def window_parts(a, b):
        """(step, overlap in ns) of the interval [a, b) with each step's window."""
        out = []
        for s in range(nsteps):
            lo, hi = max(a, bounds[s]), min(b, bounds[s + 1])
            if hi > lo:
                out.append((s, hi - lo))
        return out

    def counted(s):
        return args.skip <= s < nsteps - 1  # the last step runs into the program's teardown

    # One pass: the frontier is the latest end so far (the union of all streams' work). A record
    # starting past it opens a gap; the host caused the part of it before the record's launching
    # call began (its start: a blocking copy's call ends only after the copy itself).
    per = [collections.Counter() for _ in firsts]
    gap_src = collections.defaultdict(lambda: [0.0, 0.0, 0])  # ns total, ns host-late, count
    frontier, prev = dev[firsts[0]][0], dev[firsts[0]]
    for r in dev[firsts[0]:]:
        if r[0] > frontier:
            launch = api.get(r[4])
            host_end = min(r[0], max(frontier, launch[0])) if launch else frontier
            parts = window_parts(frontier, r[0])
            for s, ns in parts:
                per[s].update(idle=ns)
            for s, ns in window_parts(frontier, host_end):
                per[s].update(late=ns)
            if parts and counted(parts[0][0]):
                g = gap_src[(short(prev[5]), short(r[5]))]
                g[0] += r[0] - frontier
                g[1] += host_end - frontier
                g[2] += 1
        if r[1] > frontier:
            for s, ns in window_parts(max(r[0], frontier), r[1]):
                per[s].update(busy=ns)
            frontier, prev = r[1], r
    kept = 0
    tot = collections.Counter()
    print("step  span_ms  busy_ms  idle_ms  host_late_ms  sync_ms  device_records")
    for s, i in enumerate(firsts):
        t0, t1 = bounds[s], bounds[s + 1]
        last = firsts[s + 1] if s + 1 < nsteps else len(dev)
        sync = sum(min(e, t1) - max(b, t0) for b, e, _ in syncs if e > t0 and b < t1)
        c = per[s]
        note = "  (skipped)" if s < args.skip else ("" if counted(s) else "  (last: not counted)")
        print(f"{s:4d}  {(t1 - t0) / 1e6:7.2f}  {c['busy'] / 1e6:7.2f}  {c['idle'] / 1e6:7.2f}  "
              f"{c['late'] / 1e6:12.2f}  {sync / 1e6:7.2f}  {last - i:6d}{note}")
        if counted(s):
            kept += 1
            tot.update(span=t1 - t0, busy=c["busy"], idle=c["idle"], late=c["late"], sync=sync)
    print(f"\nmean over {kept} steps: span {tot['span'] / kept / 1e6:.2f} ms, busy "
          f"{tot['busy'] / kept / 1e6:.2f} ms ({100 * tot['busy'] / tot['span']:.1f} %), idle "
          f"{tot['idle'] / kept / 1e6:.2f} ms, of it host-late {tot['late'] / kept / 1e6:.2f} ms; "
          f"host in synchronising calls {tot['sync'] / kept / 1e6:.2f} ms")
    print(f"\nlargest idle sources (ms per step; host-late share; gaps per step): work before -> "
          f"work after")
    for (a, b), (ns, host, n) in sorted(gap_src.items(), key=lambda kv: -kv[1][0])[:args.top]:
        print(f"  {ns / kept / 1e6:7.3f} ms  host {host / kept / 1e6:6.3f}  x{n / kept:6.1f}  "
              f"{a} -> {b}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
