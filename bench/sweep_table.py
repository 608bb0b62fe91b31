#!/usr/bin/env python3
"""The context-length sweep's tables (scripts/gpu_check.sh bench): one table per config from the
JSON lines of bench_train_gpu (tagged with config, seqs, seq by the script) and of
bench/gpu_peer_transformers.py.

Rows: shape x GC. Columns: tokens/s of zerotune (GC as the row), zerotune --gc --offload (GC-on rows),
transformers+Liger (bf16), transformers+Liger fp32-master; zerotune / the best peer of the row (the
fastest peer record, any variant); peak GiB of each (zerotune: device memory in use after start-up;
peers: torch.cuda.max_memory_allocated), then zerotune's pools' maximum allocation (the like-for-like
figure; n/a in records older than the field), and with --selective-shapes zerotune --gc
--keep-attention (selective activation checkpointing: compute.selective_checkpointing) on the GC-on
rows of those shapes: its tokens/s, its ratio to the best peer and its peak GiB. Variants other than the two Liger ones (plain, plain32)
are listed below the table. A cell reads OOM for a recorded peer OOM, ERR for a recorded error,
'-' where the plan has no run, MISSING where the plan has one and no record came.

Usage: sweep_table.py RESULTS.jsonl --configs a,b --shapes 4x2048,… --gc-off-shapes 4x2048,…
       [--offload 1] [--peer-variants SPEC] [--selective-shapes 1x8192,…]   (SPEC as gpu_peer_transformers.py --variants; '' = none)
Exit status 1 when a planned cell is MISSING or ERR.
"""
import argparse
import json
import sys

from sweep_spec import SYSTEMS, parse_shapes, parse_variants  # beside this file

COLUMNS = ("liger", "liger32")  # peer kinds with their own columns


def fmt_shape(shape):
    return f"{shape[0]} x {shape[1]}"


def row_order(shape_gc):
    """Rows by tokens per micro-batch, then more sequences first, GC on before off."""
    (seqs, seq), gc = shape_gc
    return seqs * seq, -seqs, not gc


def main():
    p = argparse.ArgumentParser()
    p.add_argument("results")
    p.add_argument("--configs", required=True, help="comma-separated config names, table order")
    p.add_argument("--shapes", required=True, help="zerotune's GC-on shapes")
    p.add_argument("--gc-off-shapes", default="", help="zerotune's GC-off shapes")
    p.add_argument("--offload", type=int, default=1, help="1: a zerotune --gc --offload run per shape")
    p.add_argument("--peer-variants", default="", help="the peer's --variants ('' = no peer run)")
    p.add_argument("--selective-shapes", default="",
                   help="shapes with a zerotune --gc --keep-attention run ('' = none)")
    a = p.parse_args()
    shapes, off_shapes = parse_shapes(a.shapes), parse_shapes(a.gc_off_shapes)
    sel_shapes = parse_shapes(a.selective_shapes)
    peer_plan = parse_variants(a.peer_variants, shapes)
    configs = [c for c in a.configs.split(",") if c]

    # cells[(config, shape, gc, column)] = record; column: "zt", "zt_off" or a peer kind
    cells = {}
    for line in open(a.results):
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        shape = (r.get("seqs"), r.get("seq"))
        if r.get("system") == "zerotune":
            col = "zt_off" if r.get("offload") else "zt_sel" if r.get("keep_attention") else "zt"
        else:
            col = r.get("variant")
        cells[(r.get("config"), shape, bool(r.get("gc")), col)] = r

    planned = set()
    for c in configs:
        planned |= {(c, s, True, "zt") for s in shapes} | {(c, s, False, "zt") for s in off_shapes}
        if a.offload:
            planned |= {(c, s, True, "zt_off") for s in shapes}
        planned |= {(c, s, True, "zt_sel") for s in sel_shapes}
        for kind, gc, kind_shapes in peer_plan:
            planned |= {(c, s, bool(gc), kind) for s in kind_shapes}

    bad = {}  # planned cells without a usable record, in the order found (a dict: no repeats)

    def cell(key, field, width, form):
        r = cells.get(key)
        if r is None:
            if key in planned:
                bad[key] = None
                return f"{'MISSING':>{width}s}"
            return f"{'-':>{width}s}"
        if r.get("error"):
            if r["error"] != "oom":
                bad[key] = None
            return f"{'OOM' if r['error'] == 'oom' else 'ERR':>{width}s}"
        v = r.get(field)
        return f"{'n/a':>{width}s}" if v is None else f"{v:{width}{form}}"

    def best_peer(c, s, gc):
        v = [r["tokens_per_s"] for (c2, s2, g2, col), r in cells.items()
             if (c2, s2, g2) == (c, s, gc) and col in SYSTEMS and r.get("tokens_per_s")]
        return max(v) if v else None

    def ratio_to(v, bp):
        return f"{v / bp:7.2f}x" if v and bp else f"{'-':>8s}"

    head = (f"{'shape':12s} {'GC':3s} {'zerotune':>9s} {'zt+offl':>9s} {'Liger':>9s} {'Liger32':>9s} "
            f"{'zt/best':>8s} {'zt GiB':>7s} {'zt+o GiB':>8s} {'Liger GiB':>9s} {'L32 GiB':>8s} "
            f"{'zt alloc':>8s} {'zt+o alloc':>10s}" +
            (f" {'zt sel':>9s} {'sel/best':>8s} {'sel GiB':>7s}" if sel_shapes else ""))
    for c in configs:
        print(f"{c}: tokens/s per system; Liger = transformers+Liger (bf16), Liger32 = transformers+Liger "
              "fp32-master; zt/best = zerotune / the fastest peer of the row")
        print(head)
        rows = sorted({(s, g) for (c2, s, g, _) in planned | set(cells) if c2 == c}, key=row_order)
        for s, g in rows:
            k = lambda col: (c, s, g, col)
            z, bp = cells.get(k("zt"), {}).get("tokens_per_s"), best_peer(c, s, g)
            ratio = ratio_to(z, bp)
            zs = cells.get(k("zt_sel"), {}).get("tokens_per_s")
            sel = (f" {cell(k('zt_sel'), 'tokens_per_s', 9, '.0f')} {ratio_to(zs, bp)} "
                   f"{cell(k('zt_sel'), 'peak_gib', 7, '.2f')}") if sel_shapes else ""
            print(f"{fmt_shape(s):12s} {'on' if g else 'off':3s} {cell(k('zt'), 'tokens_per_s', 9, '.0f')} "
                  f"{cell(k('zt_off'), 'tokens_per_s', 9, '.0f')} {cell(k('liger'), 'tokens_per_s', 9, '.0f')} "
                  f"{cell(k('liger32'), 'tokens_per_s', 9, '.0f')} {ratio} {cell(k('zt'), 'peak_gib', 7, '.2f')} "
                  f"{cell(k('zt_off'), 'peak_gib', 8, '.2f')} {cell(k('liger'), 'peak_gib', 9, '.2f')} "
                  f"{cell(k('liger32'), 'peak_gib', 8, '.2f')} {cell(k('zt'), 'max_allocated_gib', 8, '.2f')} "
                  f"{cell(k('zt_off'), 'max_allocated_gib', 10, '.2f')}{sel}")
        for (c2, s, g, col), r in sorted(cells.items(), key=lambda kv: (row_order(kv[0][1:3]), kv[0][3] or "")):
            if c2 == c and col in SYSTEMS and col not in COLUMNS:
                z = cells.get((c, s, g, "zt"), {}).get("tokens_per_s")
                val = (f"{r['error'].upper()}" if r.get("error") else
                       f"{r['tokens_per_s']:.0f} tokens/s, " +
                       (f"{r['peak_gib']:.2f} GiB" if r.get("peak_gib") is not None else "peak n/a")
                       + (f"; zerotune / it {z / r['tokens_per_s']:.2f}x" if z else ""))
                print(f"  {r['system']}, {fmt_shape(s)}, GC {'on' if g else 'off'}: {val}")
                if r.get("error") and r["error"] != "oom":
                    bad[(c, s, g, col)] = None
        print()
    for key in bad:
        print(f"sweep_table.py: {key[0]} {fmt_shape(key[1])} GC {'on' if key[2] else 'off'} {key[3]}: "
              f"{'no record' if key not in cells else cells[key].get('message', 'error')}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
