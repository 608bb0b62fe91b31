#!/usr/bin/env python3
"""One JSON line per run of bench/peer_deepspeed.sh: the TRL + DeepSpeed peer's runs and zerotune's, with
the same fields, so that the two systems read side by side. Standard library only (runs anywhere).

Inputs:
  --peer FILE         the peer's results.jsonl (one record per finished run, written by rank 0 of
                      peers/trl_deepspeed_sft.py train)
  --peer-partial FILE its results.jsonl.partial (one line per logged step, rank 0): runs cut off by the
                      time budget enter from here, marked complete=false, with rank 0's numbers only
  --zt-metrics FILE   zerotune's metrics.jsonl records of every run, each with a "run" field added (the tag)
  --host-mem FILE     bench/host_mem_sampler.py's TSV
  --out FILE          written: one JSON object per line

Fields of a line (None where a system does not report it):
  system                 "trl+deepspeed" | "zerotune"
  tag, zero_stage, offload ("cpu" | "none"), complete (the run reached its last step)
  world_size, per_device_batch, grad_accum, global_batch, steps_done, measured_steps
  tokens_per_s_per_gpu   non-padding tokens (attention_mask == 1; zerotune: the rows' tokens, it packs
                         without padding) per second per GPU over the measured steps: optimizer steps
                         after the first 2 (allocator growth, autotuning, JIT), Σ tokens / Σ step seconds
                         / world size
  padded_tokens_per_s_per_gpu  the same with padding counted (peer only)
  padding_fraction       1 − non-padding / padded tokens over the measured steps (peer only)
  s_per_step             mean seconds per measured optimizer step
  peak_gpu_gib           peer: max over ranks of torch.cuda.max_memory_allocated; zerotune: rank 0's
                         device memory in use (its pools, allocated before step 1)
  peak_gpu_reserved_gib  peer: max over ranks of torch.cuda.max_memory_reserved
  host_hwm_gib           Σ over the ranks alive at the last sample of their VmHWM (peak resident set;
                         an upper bound of the peak of the sum)
  host_rss_peak_gib      peak over samples of Σ VmRSS of the run's processes (sampled every second)
  host_pss_peak_gib      the same with Pss (shared pages split between processes)
  losses                 [[step, loss, grad_norm], …] as logged (logging_steps 1)
  versions, how          software versions; how the numbers were taken
"""
import argparse
import json
import os
import re

SKIP = 2  # first optimizer steps left out of the throughput (the peer's own rule too)
GIB = 2.0**30


def stage_offload(tag):
    """(zero_stage, offload) from a tag like z2_off, z1_nooff, zt_z3_off_ds0.18.2."""
    m = re.search(r"z([0-3])_(off|nooff)", tag)
    if not m:
        return None, None
    return int(m.group(1)), ("cpu" if m.group(2) == "off" else "none")


def read_jsonl(path):
    if not path or not os.path.exists(path):
        return []
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:  # a line cut off when a run was killed
                    pass
    return out


def host_mem(path):
    """{tag: dict(host_hwm_gib, host_rss_peak_gib, host_pss_peak_gib)} from the sampler's TSV."""
    per = {}
    if not path or not os.path.exists(path):
        return {}
    with open(path) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if len(p) != 6:
                continue
            t, tag, _n, rss, pss, hwm = p
            d = per.setdefault(tag, dict(rss=0, pss=None, last_t=-1.0, last_hwm={}))
            d["rss"] = max(d["rss"], int(rss))
            if pss:
                d["pss"] = max(d["pss"] or 0, int(pss))
            hw = {int(x.split(":")[0]): int(x.split(":")[1]) for x in hwm.split(",") if x}
            if float(t) >= d["last_t"]:
                d["last_t"] = float(t)
                d["last_hwm"] = hw
    kib_gib = 1024.0 / GIB
    return {tag: dict(host_hwm_gib=sum(d["last_hwm"].values()) * kib_gib, host_rss_peak_gib=d["rss"] * kib_gib,
                      host_pss_peak_gib=d["pss"] * kib_gib if d["pss"] is not None else None)
            for tag, d in per.items()}


def blank(system, tag):
    st, off = stage_offload(tag)
    return dict(system=system, tag=tag, zero_stage=st, offload=off, complete=False, world_size=None,
                per_device_batch=None, grad_accum=None, global_batch=None, steps_done=None,
                measured_steps=None, tokens_per_s_per_gpu=None, padded_tokens_per_s_per_gpu=None,
                padding_fraction=None, s_per_step=None, peak_gpu_gib=None, peak_gpu_reserved_gib=None,
                host_hwm_gib=None, host_rss_peak_gib=None, host_pss_peak_gib=None, losses=[], versions=None,
                how=None)


def peer_complete(rec):
    """A line from a finished peer run (all ranks' step timing, gathered by rank 0)."""
    r = blank("trl+deepspeed", rec["tag"])
    ga = rec["gradient_accumulation_steps"]
    world = rec["world_size"]
    tok = pad = 0
    for pr in rec["per_rank"]:
        use = [s for s in pr["steps"] if s["micro_batches"] == ga][SKIP:] or pr["steps"]
        tok += sum(s["tokens_nonpad"] for s in use)
        pad += sum(s["tokens_padded"] for s in use)
    # the peer's own aggregate over the same steps: mean over ranks of (rank's tokens / rank's seconds)
    agg = rec["throughput"]["aggregate"]
    r0 = rec["throughput"]["per_rank"]["rank0"]
    r.update(
        complete=True, world_size=world, per_device_batch=rec["per_device_train_batch_size"], grad_accum=ga,
        global_batch=rec["global_batch_size"], steps_done=rec["global_steps"], measured_steps=r0["measured_steps"],
        tokens_per_s_per_gpu=agg["tokens_per_s_per_gpu_nonpad"],
        padded_tokens_per_s_per_gpu=agg["tokens_per_s_per_gpu_padded"],
        padding_fraction=1.0 - tok / pad if pad else None,
        s_per_step=agg["mean_step_s"],
        peak_gpu_gib=max((pr["peak_allocated"] or 0) for pr in rec["per_rank"]) / GIB,
        peak_gpu_reserved_gib=max((pr["peak_reserved"] or 0) for pr in rec["per_rank"]) / GIB,
        losses=[[h["step"], h.get("loss"), h.get("grad_norm")] for h in rec["log_history"] if "loss" in h],
        versions={k: rec["versions"].get(k) for k in ("torch", "transformers", "accelerate", "trl", "deepspeed")},
        how="peer: per-step timing on_step_begin→on_step_end with cuda synchronize (eval excluded), "
            "tokens = attention_mask.sum() of the micro-batches each rank processed",
    )
    return r


def peer_partial(tag, recs):
    """A run cut off by the budget: rank 0's logged steps only (its tokens / its seconds per GPU)."""
    r = blank("trl+deepspeed", tag)
    timing = {}
    losses = {}
    for x in recs:
        if x.get("timing"):
            timing[x["timing"]["step"]] = x["timing"]
        h = x.get("logs") or {}
        if "loss" in h:
            losses[x["step"]] = [x["step"], h.get("loss"), h.get("grad_norm")]
    steps = [timing[k] for k in sorted(timing)]
    if steps:
        ga = max(s["micro_batches"] for s in steps)
        use = [s for s in steps if s["micro_batches"] == ga][SKIP:]
        sec = sum(s["seconds"] for s in use)
        tok = sum(s["tokens_nonpad"] for s in use)
        pad = sum(s["tokens_padded"] for s in use)
        r.update(grad_accum=ga, steps_done=steps[-1]["step"], measured_steps=[s["step"] for s in use],
                 tokens_per_s_per_gpu=tok / sec if sec else None,
                 padded_tokens_per_s_per_gpu=pad / sec if sec else None,
                 padding_fraction=1.0 - tok / pad if pad else None, s_per_step=sec / len(use) if use else None,
                 peak_gpu_gib=max((s.get("max_allocated") or 0) for s in steps) / GIB,
                 peak_gpu_reserved_gib=max((s.get("max_reserved") or 0) for s in steps) / GIB)
    r.update(losses=[losses[k] for k in sorted(losses)],
             how="peer, cut off by the time budget: rank 0's steps only (its tokens / its seconds)")
    return r


def zerotune_runs(recs, world_of):
    """Lines for zerotune's runs from their metrics.jsonl records (each with "run" = tag)."""
    by = {}
    for x in recs:
        by.setdefault(x.get("run"), []).append(x)
    out = []
    for tag, xs in sorted(by.items()):
        r = blank("zerotune", tag)
        tr = sorted((x for x in xs if "loss" in x or "train_tokens_per_second" in x), key=lambda x: x["step"])
        meta = next((x for x in xs if x.get("_meta")), {})
        world = meta.get("world_size") or world_of
        # per step: tokens = Δ num_tokens (all ranks), seconds = tokens / train_tokens_per_second
        rows, prev = [], 0.0
        for x in tr:
            t = x["num_tokens"] - prev
            prev = x["num_tokens"]
            if x.get("train_tokens_per_second"):
                rows.append((x["step"], t, t / x["train_tokens_per_second"]))
        use = rows[SKIP:] or rows
        sec = sum(u[2] for u in use)
        tok = sum(u[1] for u in use)
        gpu = [x["peak_gpu_memory_gib"] for x in tr if x.get("peak_gpu_memory_gib") is not None]
        r.update(complete=bool(meta.get("rc") == 0 and tr and tr[-1]["step"] == meta.get("max_steps")),
                 world_size=world, per_device_batch=meta.get("per_device_batch"), global_batch=meta.get("global_batch"),
                 grad_accum=meta.get("grad_accum"),
                 steps_done=tr[-1]["step"] if tr else 0, measured_steps=[u[0] for u in use],
                 tokens_per_s_per_gpu=tok / sec / world if sec and world else None,
                 s_per_step=sec / len(use) if use else None,
                 peak_gpu_gib=max(gpu) if gpu else None,
                 losses=[[x["step"], x.get("loss"), x.get("grad_norm")] for x in tr if "loss" in x],
                 versions=dict(zerotune=meta.get("version")),
                 how="zerotune metrics.jsonl, logging_steps 1: step seconds = Δnum_tokens / train_tokens_per_second "
                     "(wall time between logs); peak_gpu_gib = rank 0's device memory in use")
        out.append(r)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--peer")
    p.add_argument("--peer-partial")
    p.add_argument("--zt-metrics")
    p.add_argument("--host-mem")
    p.add_argument("--world-size", type=int, default=2, help="zerotune's world size when its meta line lacks it")
    p.add_argument("--out", required=True)
    a = p.parse_args()

    mem = host_mem(a.host_mem)
    lines = []
    done = {}
    for rec in read_jsonl(a.peer):
        done[rec["tag"]] = rec  # a later line of the same tag wins
    for rec in done.values():
        lines.append(peer_complete(rec))
    partial = {}
    for x in read_jsonl(a.peer_partial):
        if x.get("tag") not in done:
            partial.setdefault(x["tag"], []).append(x)
    for tag, recs in partial.items():
        lines.append(peer_partial(tag, recs))
    lines += zerotune_runs(read_jsonl(a.zt_metrics), a.world_size)
    for r in lines:
        r.update({k: v for k, v in mem.get(r["tag"], {}).items()})
    with open(a.out, "w") as f:
        for r in lines:
            f.write(json.dumps(r) + "\n")
    for r in lines:
        tps = r["tokens_per_s_per_gpu"]
        print(f"{r['system']:14s} {r['tag']:22s} stage={r['zero_stage']} offload={r['offload']:4s} "
              f"complete={str(r['complete']):5s} tok/s/GPU={tps if tps is None else round(tps)} "
              f"s/step={r['s_per_step'] if r['s_per_step'] is None else round(r['s_per_step'], 2)} "
              f"GPU GiB={r['peak_gpu_gib'] if r['peak_gpu_gib'] is None else round(r['peak_gpu_gib'], 2)} "
              f"host HWM GiB={r['host_hwm_gib'] if r['host_hwm_gib'] is None else round(r['host_hwm_gib'], 1)}")


if __name__ == "__main__":
    main()
