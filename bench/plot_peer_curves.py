#!/usr/bin/env python3
"""Train-loss curves of every run in peer_deepspeed.jsonl files (bench/peer_deepspeed_summary.py's
output: zerotune and TRL + DeepSpeed side by side) in one PNG, drawn by gnuplot (no Python plotting
package needed).

Usage: python3 bench/plot_peer_curves.py OUT.png RUNS.jsonl [RUNS.jsonl ...]
"""
import json
import os
import subprocess
import sys
import tempfile


def main() -> int:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, files = sys.argv[1], sys.argv[2:]
    runs = []
    for f in files:
        for line in open(f):
            r = json.loads(line)
            pts = [(x[0], x[1]) for x in r.get("losses", []) if x[1] is not None]  # [step, loss, grad_norm]
            if pts:
                runs.append((f"{r['system']} {r['tag']}", pts))
    if not runs:
        sys.exit(f"plot_peer_curves.py: no run with losses in {', '.join(files)}")
    with tempfile.TemporaryDirectory() as d:
        plots = []
        for i, (name, pts) in enumerate(runs):
            p = os.path.join(d, f"{i}.dat")
            with open(p, "w") as fh:
                fh.writelines(f"{s} {l}\n" for s, l in pts)
            dash = 1 if name.startswith("zerotune") else 2
            plots.append(f"'{p}' using 1:2 with linespoints dt {dash} title '{name}'")
        script = (f"set terminal pngcairo noenhanced size 1100,700\nset output '{out}'\n"
                  "set xlabel 'optimizer step'\nset ylabel 'train loss'\nset key top right\n"
                  "set title 'Qwen2.5-1.5B config, UltraFeedback seed format, 2 x H200, global batch 40'\n"
                  "plot " + ", ".join(plots) + "\n")
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
    print(f"{out}: {len(runs)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
