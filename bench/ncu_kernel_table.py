#!/usr/bin/env python3
"""Per-kernel time table from an ncu CSV (`ncu --csv --page raw --metrics gpu__time_duration.sum`).

Usage: ncu_kernel_table.py NCU_CSV STEPS [TOP]
Groups the kernels by name (template arguments cut off), sums gpu__time_duration (ns) and prints,
per optimizer step (the sum divided by STEPS, the number of steps the profiled program ran), the
TOP largest groups with their share of the kernel time. Exits 1 when the file has no kernel rows
(ncu failed), so the caller's check fails.
"""
import csv
import re
import sys
from collections import defaultdict


def short(name: str) -> str:
    """The kernel's qualified name without return type, namespaces zt/anonymous, template
    arguments or parameters: "void zt::cuda::(anonymous namespace)::rmsnorm_fwd<bf16, 4>(...)"
    -> "cuda::rmsnorm_fwd" (ncu writes the anonymous namespace as "(anonymous namespace)" or
    "<unnamed>", which cut at the first '<' or '(' left only "cuda::" before)."""
    name = name.strip()
    for anon in ("(anonymous namespace)::", "<unnamed>::", "`anonymous namespace'::"):
        name = name.replace(anon, "")
    name = re.sub(r"^void ", "", name)
    name = re.sub(r"^zt::", "", name)
    name = re.sub(r"<.*", "", name)       # template arguments
    name = re.sub(r"\(.*", "", name)      # parameter list
    return name.strip()[:70]


def main() -> int:
    path, steps = sys.argv[1], int(sys.argv[2])
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    lines = open(path, errors="replace").read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        print(f"ncu_kernel_table: no kernel table in {path}", file=sys.stderr)
        return 1
    rows = list(csv.DictReader(lines[start:]))
    total = defaultdict(float)
    count = defaultdict(int)
    for r in rows:
        v = r.get("gpu__time_duration.sum", "")
        try:
            ns = float(v.replace(",", ""))
        except ValueError:
            continue  # the units row
        k = short(r.get("Kernel Name", "?"))
        total[k] += ns
        count[k] += 1
    if not total:
        print(f"ncu_kernel_table: no timed kernels in {path}", file=sys.stderr)
        return 1
    all_ns = sum(total.values())
    print(f"kernel time per step: {all_ns / steps / 1e6:.2f} ms over {sum(count.values()) // steps} launches")
    for k, ns in sorted(total.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {ns / steps / 1e6:9.3f} ms {100 * ns / all_ns:5.1f} %  {count[k] // steps:5d}x  {k}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
