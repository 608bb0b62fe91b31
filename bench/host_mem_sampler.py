#!/usr/bin/env python3
"""Host-memory sampler for the training processes of a benchmark run (Linux /proc; no third-party
modules). Used by bench/peer_deepspeed.sh beside the TRL + DeepSpeed peer and zerotune.

Every --interval seconds it reads /proc/PID/cmdline of each process and keeps the training processes:
  - the peer's ranks: argv holds "trl_deepspeed_sft.py" and "train"; the run's tag is the value after
    "--tag";
  - zerotune's ranks: the executable (/proc/PID/exe; `zerotune launch` starts its ranks as
    /proc/self/exe) is named "zerotune" and argv holds "train"; the tag is the last path component of
    the "exp_dir=" argument.
Launchers (argv holding "launch": `accelerate launch`, `zerotune launch`) are left out. For each kept
process it reads VmRSS and VmHWM (kB, /proc/PID/status) and Pss (kB, /proc/PID/smaps_rollup, absent
on old kernels) and appends one line per sample and tag to --out (TSV):
  unix_time  tag  n_procs  sum_VmRSS_kB  sum_Pss_kB  pid:VmHWM_kB,pid:VmHWM_kB,…
bench/peer_deepspeed_summary.py turns the file into per-run peaks. Runs until killed (SIGTERM).
A process that exits between listing and reading is skipped.
"""
import argparse
import os
import signal
import sys
import time


def kb_field(text, key):
    """Value in kB of a `Key:   N kB` line of a /proc status/smaps file; None if absent."""
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return None


def classify(argv, exe):
    """The run tag of a training process from its argv (list of str) and executable path, or None."""
    if not argv or "launch" in argv:
        return None
    if any(a.endswith("trl_deepspeed_sft.py") for a in argv) and "train" in argv:
        if "--tag" in argv and argv.index("--tag") + 1 < len(argv):
            return argv[argv.index("--tag") + 1]
        return "peer_untagged"
    if os.path.basename(exe) == "zerotune" and "train" in argv:
        for a in argv:
            if a.startswith("exp_dir="):
                return os.path.basename(a[len("exp_dir="):].rstrip("/"))
        return "zerotune_untagged"
    return None


def read(path):
    with open(path, "rb") as f:
        return f.read()


def sample():
    """{tag: [(pid, VmRSS_kB, VmHWM_kB, Pss_kB or None)]} for the training processes now running."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            argv = [a.decode(errors="replace") for a in read(f"/proc/{d}/cmdline").split(b"\0") if a]
            try:
                exe = os.readlink(f"/proc/{d}/exe")
            except OSError:  # another user's process, or a kernel thread
                exe = ""
            tag = classify(argv, exe)
            if tag is None:
                continue
            st = read(f"/proc/{d}/status").decode(errors="replace")
            rss, hwm = kb_field(st, "VmRSS"), kb_field(st, "VmHWM")
            try:
                pss = kb_field(read(f"/proc/{d}/smaps_rollup").decode(errors="replace"), "Pss")
            except OSError:
                pss = None
        except OSError:  # the process ended meanwhile
            continue
        if rss is None:  # a zombie
            continue
        out.setdefault(tag, []).append((int(d), rss, hwm or rss, pss))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True, help="TSV file, appended to")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    a = p.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with open(a.out, "a") as f:
        while True:
            now = time.time()
            for tag, procs in sorted(sample().items()):
                pss = [x[3] for x in procs]
                f.write("\t".join([
                    f"{now:.1f}", tag, str(len(procs)), str(sum(x[1] for x in procs)),
                    str(sum(pss)) if all(v is not None for v in pss) else "",
                    ",".join(f"{x[0]}:{x[2]}" for x in procs)]) + "\n")
            f.flush()
            time.sleep(a.interval)


if __name__ == "__main__":
    main()
