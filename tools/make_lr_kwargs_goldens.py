#!/usr/bin/env python3
"""Writes tests/data/optim/schedules_kwargs.json: transformers.get_scheduler's learning rate per
step for every lr_scheduler_type zerotune implements beyond linear/cosine/constant (those are in
schedules.json), with the lr_scheduler_kwargs (scheduler_specific_kwargs) a user's trainer config
passes, as Trainer.create_scheduler calls it: get_scheduler(name, optimizer, num_warmup_steps,
num_training_steps, scheduler_specific_kwargs=args.lr_scheduler_kwargs).

Run with torch (CPU) + transformers 4.57.1:
    python tools/make_lr_kwargs_goldens.py
Each case: {"kind", "base_lr", "warmup", "total", "kwargs", "lr": [lr of step 0 … total-1]} (the
lr is LambdaLR's get_last_lr() before each optimizer step, what Trainer logs as learning_rate).

A bool where a schedule takes a number (TrainingArguments' _convert_str_dict makes '"true"' True)
is Python's 1 / 0 in its arithmetic, for a float argument (cosine's num_cycles, polynomial's power,
min_lr_rate, …) and an int one (cosine_with_restarts' num_cycles, warmup_stable_decay's
num_decay_steps) alike: those cases are among "cases". Where the schedule refuses the value
(polynomial's lr_end True is not below the learning rate; a bool warmup_type), "errors" records
its exception: {"kind", "base_lr", "warmup", "total", "kwargs", "error"}.
"""
import json
import os

import torch
import transformers
from transformers import get_scheduler

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "optim")

CASES = [
    ("cosine", {"num_cycles": 1.5}),
    ("cosine_with_restarts", {}),
    ("cosine_with_restarts", {"num_cycles": 3}),
    # Python's % keeps the remainder of a negative num_cycles in [0, 1) (C's fmod would not)
    ("cosine_with_restarts", {"num_cycles": -1.5}),
    ("cosine_with_restarts", {"num_cycles": -2}),
    ("polynomial", {}),
    ("polynomial", {"lr_end": 1e-6, "power": 2.0}),
    ("polynomial", {"lr_end": 0.0, "power": 0.5}),
    ("inverse_sqrt", {}),
    ("inverse_sqrt", {"timescale": 3}),  # get_scheduler passes no kwargs to inverse_sqrt
    ("constant_with_warmup", {"anything": 1}),  # … nor to constant_with_warmup
    ("cosine_with_min_lr", {"min_lr_rate": 0.1}),
    ("cosine_with_min_lr", {"min_lr": 1e-6}),
    ("cosine_with_min_lr", {"min_lr_rate": 0.2, "num_cycles": 0.75}),
    ("cosine_warmup_with_min_lr", {"min_lr_rate": 0.1}),
    ("cosine_warmup_with_min_lr", {"min_lr": 2e-6, "warmup_lr_rate": 0.25}),
    ("warmup_stable_decay", {"num_decay_steps": 10}),
    ("warmup_stable_decay", {"num_decay_steps": 7, "num_stable_steps": 9, "warmup_type": "cosine",
                             "decay_type": "1-sqrt", "min_lr_ratio": 0.1}),
    ("warmup_stable_decay", {"num_decay_steps": 12, "warmup_type": "1-sqrt", "decay_type": "linear",
                             "min_lr_ratio": 0.05, "num_cycles": 0.5}),
    # bools as numbers: float arguments …
    ("cosine", {"num_cycles": True}),
    ("cosine", {"num_cycles": False}),
    ("polynomial", {"lr_end": False, "power": True}),
    ("polynomial", {"power": False}),
    ("cosine_with_min_lr", {"min_lr_rate": True}),
    ("cosine_with_min_lr", {"min_lr": False, "num_cycles": True}),
    ("cosine_warmup_with_min_lr", {"min_lr_rate": False, "warmup_lr_rate": True}),
    # … and int ones
    ("cosine_with_restarts", {"num_cycles": True}),
    ("cosine_with_restarts", {"num_cycles": False}),
    ("warmup_stable_decay", {"num_decay_steps": True, "num_stable_steps": False,
                             "min_lr_ratio": True}),
    ("warmup_stable_decay", {"num_decay_steps": 6, "num_stable_steps": True, "num_cycles": True}),
]

# Bools the schedule refuses: (kind, kwargs).
ERROR_CASES = [
    ("polynomial", {"lr_end": True}),
    ("warmup_stable_decay", {"num_decay_steps": 5, "warmup_type": True}),
]


def lrs(kind, base_lr, warmup, total, kwargs):
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=base_lr)
    sched = get_scheduler(kind, opt, num_warmup_steps=warmup, num_training_steps=total,
                          scheduler_specific_kwargs=dict(kwargs))
    out = []
    for _ in range(total):
        out.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    return out


def main():
    assert transformers.__version__ == "4.57.1", transformers.__version__
    cases = []
    for kind, kwargs in CASES:
        for warmup, total in ((0, 37), (5, 37), (4, 9)):
            for base_lr in (2e-5, 3e-4):
                if kind == "warmup_stable_decay" and warmup + kwargs["num_decay_steps"] > total:
                    continue
                cases.append({"kind": kind, "base_lr": base_lr, "warmup": warmup, "total": total,
                              "kwargs": kwargs, "lr": lrs(kind, base_lr, warmup, total, kwargs)})
    errors = []
    for kind, kwargs in ERROR_CASES:
        try:
            lrs(kind, 2e-5, 0, 37, kwargs)
            raise AssertionError(f"{kind} {kwargs}: no error")
        except ValueError as e:
            errors.append({"kind": kind, "base_lr": 2e-5, "warmup": 0, "total": 37,
                           "kwargs": kwargs, "error": f"{type(e).__name__}: {e}"})
    with open(os.path.join(OUT, "schedules_kwargs.json"), "w") as f:
        json.dump({"generator": "tools/make_lr_kwargs_goldens.py", "transformers":
                   transformers.__version__, "cases": cases, "errors": errors}, f, indent=0)
    print(len(cases), "cases,", len(errors), "errors")


if __name__ == "__main__":
    main()
