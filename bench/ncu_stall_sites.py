#!/usr/bin/env python3
"""Where one kernel's warps stall, by SASS instruction, from ncu's source page.

Usage: ncu_stall_sites.py SOURCE_CSV [TOP]
SOURCE_CSV: `ncu --import REPORT.ncu-rep --page source --csv --print-source sass` of a report taken
with the SourceCounters section (gpu_check.sh attnprofile writes one per shape). Its first line
names the kernel, the second is the column header, then one row per SASS instruction with
"Address", "Source" (the instruction), "Warp Stall Sampling (All Samples)" and one "stall_<reason>"
column per stall reason (PC samples of warps at that instruction).

Prints the kernel's sample count, the samples by stall reason (share of all samples), then the TOP
(default 30) instructions with the most samples: their index in the listing (the row number, to find
the instruction's neighbours in the CSV), share of all samples, the three largest reasons and the
instruction. A sample counts against the instruction the warp waits to issue, so a stall on a
barrier, a wgmma wait or a scoreboard (a load's result) shows at the instruction after it or at the
first one that uses the result. Exits 1 when the file has no instruction rows or lacks the columns
(ncu failed, or was given another page), so the caller's check fails.
"""
import csv
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"


def number(text: str) -> float:
    """ncu's CSV numbers: '1,234' or '' (no samples)."""
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    with open(path, errors="replace", newline="") as f:
        rows = list(csv.reader(f))
    header_at = next((i for i, r in enumerate(rows) if r and r[0] == "Address"), None)
    if header_at is None:
        print(f"ncu_stall_sites: no instruction table (no 'Address' header) in {path}", file=sys.stderr)
        return 1
    header = rows[header_at]
    col = {name: i for i, name in enumerate(header)}
    if SAMPLES not in col or "Source" not in col:
        print(f"ncu_stall_sites: {path} has no '{SAMPLES}' or 'Source' column (not a source page "
              "with SourceCounters?)", file=sys.stderr)
        return 1
    reasons = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    data = [r for r in rows[header_at + 1:] if len(r) == len(header)]
    if not data:
        print(f"ncu_stall_sites: no instruction rows in {path}", file=sys.stderr)
        return 1
    kernel = rows[0][1] if header_at > 0 and len(rows[0]) > 1 else "?"
    total = sum(number(r[col[SAMPLES]]) for r in data)
    print(f"kernel: {kernel[:150]}")
    print(f"instructions: {len(data)}, samples: {int(total)}")
    if total <= 0:
        print(f"ncu_stall_sites: no samples in {path}", file=sys.stderr)
        return 1
    by_reason = sorted(((sum(number(r[col[h]]) for r in data), h[len("stall_"):]) for h in reasons),
                       reverse=True)
    print("samples by reason: " + ", ".join(f"{name} {100 * v / total:.1f} %"
                                            for v, name in by_reason if v > 0))
    print(f"{'row':>5s} {'share':>7s}  {'top reasons (samples)':44s} instruction")
    order = sorted(range(len(data)), key=lambda k: -number(data[k][col[SAMPLES]]))
    for k in order[:top]:
        r = data[k]
        s = number(r[col[SAMPLES]])
        if s <= 0:
            break
        tops = sorted(((number(r[col[h]]), h[len("stall_"):]) for h in reasons), reverse=True)[:3]
        why = " ".join(f"{name}:{int(v)}" for v, name in tops if v > 0)
        print(f"{k:5d} {100 * s / total:6.2f} %  {why:44s} {r[col['Source']].strip()[:100]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
