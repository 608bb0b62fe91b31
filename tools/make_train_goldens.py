#!/usr/bin/env python3
"""Writes the trainer golden files of tests/data/train/ with torch, transformers, accelerate and
tensorboard.

Run with the golden environment:
    /work/goldenv/bin/python tools/make_train_goldens.py

Files written:
  randperm.json   torch.randperm(n, generator=torch.Generator().manual_seed(seed)) on the CPU: whole
                  permutations for small n, and for large n (up to 2^24 + 1) the first and last 16
                  values and a checksum sum((2i+1) * p[i]) mod 2^64.
  step_plan.json  HF's per-step sample assignment: for each configuration (n, B, W, G, epochs or
                  max_steps, drop_last, seed / data_seed), W ranks' DataLoaders prepared by
                  accelerate's `prepare_data_loader` (SeedableRandomSampler + BatchSamplerShard,
                  even_batches=True, exactly as `Trainer.get_train_dataloader` + `accelerator.prepare`
                  build them), iterated the way `Trainer._inner_training_loop` / `_run_epoch` do
                  (set_epoch(e), windows of G micro-batches, the last window shorter, stop at
                  max_steps); per step: HF `state.epoch` and each rank's micro-batches.
  rotate.json     transformers.trainer_utils.rotate_checkpoints (use_mtime=False) and
                  get_last_checkpoint on synthetic output directories: which checkpoints remain.
  tb/events.out.tfevents.1700000000.testhost.4242
                  an event file built with the tensorboard protobuf classes and tensorboard's own
                  RecordWriter (the reference bytes zerotune's writer must reproduce), and
  tb/expected.json  what tensorboard's EventAccumulator reads back from it: per tag the
                  (wall_time, step, value) triples. A second file (…1700000100.testhost.4243)
                  resumes with purge_step, and expected.json also holds what EventAccumulator
                  shows for the directory holding both.
"""
import json
import math
import os
import shutil
import sys
import tempfile

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "train")


def randperm_goldens():
    full = []
    for seed in [0, 42, 43, 2**32 + 5, 2**64 - 1]:
        for n in list(range(0, 34)) + [64, 100, 257]:
            g = torch.Generator().manual_seed(seed)
            full.append({"n": n, "seed": str(seed), "perm": torch.randperm(n, generator=g).tolist()})
    digests = []
    for seed in [42, 7]:
        for n in [1000, 4095, 4096, 4097, 65536, 100003, 2**20, 2**24 - 1, 2**24, 2**24 + 1]:
            if seed == 7 and n > 2**20:
                continue
            g = torch.Generator().manual_seed(seed)
            p = torch.randperm(n, generator=g).numpy().astype(np.uint64)
            w = np.arange(n, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
            with np.errstate(over="ignore"):
                checksum = int(np.sum(p * w, dtype=np.uint64))
            digests.append({"n": n, "seed": str(seed), "head": p[:16].tolist(), "tail": p[-16:].tolist(),
                            "checksum": str(checksum)})
    return {"full": full, "digests": digests}


class RangeDataset(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


def hf_plan(n, B, W, G, epochs, max_steps, drop_last, seed, data_seed):
    """Per-step sample assignment of HF Trainer for W ranks (each rank simulated in turn)."""
    from accelerate.data_loader import prepare_data_loader

    ranks = []
    for r in range(W):
        # Trainer.__init__: set_seed(args.seed) -> torch.manual_seed; SeedableRandomSampler then takes
        # torch.random.initial_seed() when data_seed is None.
        torch.manual_seed(seed)
        ds = RangeDataset(n)
        # Trainer._get_dataloader: DataLoader(dataset, batch_size, sampler=RandomSampler(ds), drop_last)
        dl = torch.utils.data.DataLoader(ds, batch_size=B, sampler=torch.utils.data.RandomSampler(ds),
                                         drop_last=drop_last, collate_fn=list)
        # accelerator.prepare with AcceleratorConfig defaults (even_batches, use_seedable_sampler).
        pdl = prepare_data_loader(dl, num_processes=W, process_index=r, put_on_device=False,
                                  split_batches=False, even_batches=True, use_seedable_sampler=True,
                                  data_seed=data_seed)
        # Trainer.set_initial_training_values
        L = len(pdl)
        U = max(L // G + int(L % G > 0), 1)
        if max_steps > 0:
            T = max_steps
            num_epochs = T // U + int(T % U > 0)
        else:
            T = math.ceil(epochs * U)
            num_epochs = math.ceil(epochs)
        steps = []
        global_step = 0
        for epoch in range(num_epochs):
            # Trainer._run_epoch
            pdl.set_epoch(epoch)
            inner = getattr(getattr(pdl, "batch_sampler", None), "batch_sampler", None)
            if hasattr(inner, "set_epoch"):
                inner.set_epoch(epoch)
            it = iter(pdl)
            remainder = L % G or G
            step = -1
            stop = False
            for update_step in range(U):
                num_batches = G if update_step != U - 1 else remainder
                batches = []
                for _ in range(num_batches):
                    try:
                        batches.append([int(x) for x in next(it)])
                    except StopIteration:
                        break
                step += len(batches)
                global_step += 1
                steps.append({"epoch": epoch + (step + 1) / L, "micro_batches": batches})
                if global_step >= T:
                    stop = True
                    break
            if stop:
                break
        ranks.append({"L": L, "U": U, "T": T, "num_epochs": num_epochs, "steps": steps})
    r0 = ranks[0]
    for rk in ranks[1:]:
        assert (rk["L"], rk["U"], rk["T"], len(rk["steps"])) == (r0["L"], r0["U"], r0["T"], len(r0["steps"]))
        assert [s["epoch"] for s in rk["steps"]] == [s["epoch"] for s in r0["steps"]]
    steps = []
    for k in range(len(r0["steps"])):
        steps.append({"epoch": r0["steps"][k]["epoch"],
                      "ranks": [ranks[r]["steps"][k]["micro_batches"] for r in range(W)]})
    return {"num_samples": n, "batch_size": B, "world_size": W, "grad_accum": G,
            "num_train_epochs": epochs, "max_steps": max_steps, "drop_last": drop_last,
            "seed": seed, "data_seed": data_seed,
            "steps_in_epoch": r0["L"], "num_update_steps_per_epoch": r0["U"], "max_steps_total": r0["T"],
            "num_epochs": r0["num_epochs"], "steps": steps}


def step_plan_goldens():
    configs = []
    ns = [7, 13, 29, 37]
    i = 0
    for W in [1, 2, 4]:
        for B in [1, 3, 8]:
            for G in [1, 4]:
                n = ns[i % len(ns)]
                i += 1
                configs.append(dict(n=n, B=B, W=W, G=G, epochs=2.0, max_steps=-1, drop_last=False,
                                    seed=42, data_seed=None))
    # drop_last, fractional epochs, max_steps past one epoch, a data_seed, n < W*B, n < B.
    configs += [
        dict(n=29, B=3, W=2, G=4, epochs=2.0, max_steps=-1, drop_last=True, seed=42, data_seed=None),
        dict(n=37, B=8, W=4, G=1, epochs=1.0, max_steps=-1, drop_last=True, seed=1, data_seed=None),
        dict(n=13, B=3, W=1, G=1, epochs=1.0, max_steps=-1, drop_last=True, seed=42, data_seed=None),
        dict(n=29, B=3, W=2, G=1, epochs=1.5, max_steps=-1, drop_last=False, seed=42, data_seed=None),
        dict(n=13, B=3, W=2, G=2, epochs=2.2, max_steps=-1, drop_last=False, seed=42, data_seed=None),
        dict(n=13, B=3, W=2, G=4, epochs=3.0, max_steps=7, drop_last=False, seed=42, data_seed=None),
        dict(n=29, B=8, W=1, G=4, epochs=3.0, max_steps=5, drop_last=False, seed=42, data_seed=None),
        dict(n=13, B=3, W=2, G=1, epochs=2.0, max_steps=-1, drop_last=False, seed=42, data_seed=1234),
        dict(n=5, B=3, W=4, G=1, epochs=2.0, max_steps=-1, drop_last=False, seed=3, data_seed=None),
        dict(n=2, B=8, W=4, G=4, epochs=2.0, max_steps=-1, drop_last=False, seed=3, data_seed=None),
        dict(n=2, B=8, W=1, G=1, epochs=2.0, max_steps=-1, drop_last=False, seed=3, data_seed=None),
        dict(n=24, B=3, W=4, G=1, epochs=1.0, max_steps=-1, drop_last=False, seed=5, data_seed=None),
        dict(n=25, B=3, W=3, G=2, epochs=1.0, max_steps=-1, drop_last=False, seed=5, data_seed=None),
        # math.ceil(2.2 * 25) = ceil(55.00000000000001) = 56 steps.
        dict(n=25, B=1, W=1, G=1, epochs=2.2, max_steps=-1, drop_last=False, seed=5, data_seed=None),
    ]
    return [hf_plan(c["n"], c["B"], c["W"], c["G"], c["epochs"], c["max_steps"], c["drop_last"],
                    c["seed"], c["data_seed"]) for c in configs]


def rotate_goldens():
    from transformers.trainer_utils import get_last_checkpoint, rotate_checkpoints

    # (existing entries, save_total_limit, best step or None or "missing")
    scenarios = [
        (["checkpoint-10", "checkpoint-20", "checkpoint-30", "checkpoint-40"], 2, None),
        (["checkpoint-10", "checkpoint-20", "checkpoint-30", "checkpoint-40"], 1, None),
        (["checkpoint-10", "checkpoint-20", "checkpoint-30", "checkpoint-40"], 2, 20),
        (["checkpoint-10", "checkpoint-20", "checkpoint-30", "checkpoint-40"], 1, 20),
        (["checkpoint-10", "checkpoint-20", "checkpoint-30", "checkpoint-40"], 1, 40),
        (["checkpoint-10", "checkpoint-20", "checkpoint-30", "checkpoint-40"], 1, "missing"),
        (["checkpoint-10", "checkpoint-20", "checkpoint-30"], 5, None),
        (["checkpoint-10", "checkpoint-20", "checkpoint-30"], 0, None),
        (["checkpoint-9", "checkpoint-10", "checkpoint-100", "checkpoint-1000", "checkpoint-99"], 3, None),
        (["checkpoint-500", "checkpoint-1000", "checkpoint-1500", "notes", "checkpoint-x"], 2, 500),
    ]
    out = []
    for entries, limit, best in scenarios:
        d = tempfile.mkdtemp()
        try:
            for e in entries:
                os.mkdir(os.path.join(d, e))
            last = get_last_checkpoint(d)
            best_path = None
            if best == "missing":
                best_path = os.path.join(d, "checkpoint-5")
            elif best is not None:
                best_path = os.path.join(d, f"checkpoint-{best}")
            rotate_checkpoints(d, save_total_limit=limit, best_model_checkpoint=best_path, use_mtime=False)
            remaining = sorted(os.listdir(d))
        finally:
            shutil.rmtree(d)
        out.append({"entries": entries, "save_total_limit": limit,
                    "best": None if best is None else ("checkpoint-5" if best == "missing" else f"checkpoint-{best}"),
                    "latest": os.path.basename(last) if last else None, "remaining": remaining})
    return out


def tb_goldens(tb_dir):
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.record_writer import RecordWriter

    def file_version(t):
        return event_pb2.Event(wall_time=t, file_version="brain.Event:2",
                               source_metadata=event_pb2.SourceMetadata(writer="zerotune"))

    def scalar(t, step, tag, v):
        return event_pb2.Event(wall_time=t, step=step, summary=summary_pb2.Summary(
            value=[summary_pb2.Summary.Value(tag=tag, simple_value=v)]))

    def start(t, step):
        return event_pb2.Event(wall_time=t, step=step,
                               session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START))

    # The C++ test (tests/train/test_tensorboard.cpp) writes exactly these events.
    first = [file_version(1700000000.25)]
    for step in range(1, 6):
        t = 1700000000.25 + step
        first += [scalar(t, step, "train/loss", 2.5 / step), scalar(t, step, "train/grad_norm", 0.1 * step),
                  scalar(t, step, "train/learning_rate", 2e-5 * (6 - step) / 5),
                  scalar(t, step, "train/epoch", step / 5)]
    first += [scalar(1700000006.5, 5, "eval/loss", 1.75), scalar(1700000006.5, 0, "train/zero", 0.0),
              scalar(1700000006.5, 7, "train/negative", -3.0e38)]
    second = [file_version(1700000100.0), start(1700000100.0, 3)]
    for step in range(3, 5):
        t = 1700000100.0 + step
        second += [scalar(t, step, "train/loss", 10.0 + step)]

    os.makedirs(tb_dir, exist_ok=True)
    for f in os.listdir(tb_dir):
        if f.startswith("events.out.tfevents"):
            os.remove(os.path.join(tb_dir, f))
    names = ["events.out.tfevents.1700000000.testhost.4242", "events.out.tfevents.1700000100.testhost.4243"]
    for name, events in zip(names, [first, second]):
        with open(os.path.join(tb_dir, name), "wb") as fh:
            w = RecordWriter(fh)
            for ev in events:
                w.write(ev.SerializeToString())

    def read(path):
        acc = event_accumulator.EventAccumulator(path, size_guidance={event_accumulator.SCALARS: 0})
        acc.Reload()
        return {tag: [[e.wall_time, e.step, e.value] for e in acc.Scalars(tag)]
                for tag in sorted(acc.Tags()["scalars"])}

    single = read(os.path.join(tb_dir, names[0]))
    with tempfile.TemporaryDirectory() as d:
        for name in names:
            shutil.copy(os.path.join(tb_dir, name), d)
        resumed = read(d)
    return {"files": names, "first_file": single, "directory_after_resume": resumed}


def main():
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "randperm.json"), "w") as f:
        json.dump(randperm_goldens(), f, separators=(",", ":"))
    with open(os.path.join(OUT, "step_plan.json"), "w") as f:
        json.dump(step_plan_goldens(), f, separators=(",", ":"))
    with open(os.path.join(OUT, "rotate.json"), "w") as f:
        json.dump(rotate_goldens(), f, indent=1)
    tb = tb_goldens(os.path.join(OUT, "tb"))
    with open(os.path.join(OUT, "tb", "expected.json"), "w") as f:
        json.dump(tb, f, indent=1)
    for root, _, files in os.walk(OUT):
        for name in sorted(files):
            p = os.path.join(root, name)
            print(f"{os.path.relpath(p, OUT)}: {os.path.getsize(p)} bytes")


if __name__ == "__main__":
    sys.exit(main())
