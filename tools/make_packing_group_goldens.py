#!/usr/bin/env python3
"""Makes the packing-group fixture and golden of zerotune's data layer (tests/data/pretok/).

TRL 0.25.1 packs a tokenised dataset with `pack_dataset(dataset, max_length, "bfd", map_kwargs)`,
map_kwargs = {"num_proc": args.dataset_num_proc} (SFTTrainer._prepare_dataset), i.e. one
`datasets.map(_pack_bfd, batched=True, num_proc=...)`: rows are cut into num_proc contiguous shards
and each shard into batches of 1000 rows, and each batch is packed apart. So the bins depend on
dataset_num_proc. This script runs trl.data_utils.pack_dataset itself (no torch needed) on a
pre-tokenised dataset whose first id names its row, for several dataset_num_proc values, and
writes the bins as lists of source rows.

Run with trl 0.25.1 + datasets 4.x:
    python tools/make_packing_group_goldens.py
Writes tests/data/pretok/pack_groups.jsonl (2100 rows: input_ids [row + 1, ...], 2 to 9 ids; row 3
has one id, so no target: TRL packs it, zerotune drops it) and pack_groups.golden.json:
{"max_length": 16, "cases": {"<rows>:<num_proc>": [[row, ...] per bin, in TRL's order]}} for
the whole file under num_proc null, 0, 2 and 3, and its first 6 rows under num_proc 8 (datasets
reduces num_proc to the row count).
"""
import json
import os
import random
import tempfile

import datasets
import trl
import trl.data_utils as du

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "data", "pretok")
ROWS, MAX_LENGTH = 2100, 16

datasets.disable_progress_bars()
datasets.logging.set_verbosity_error()


def main():
    assert trl.__version__ == "0.25.1", trl.__version__
    rng = random.Random(20261207)
    rows = []
    for r in range(ROWS):
        n = 1 if r == 3 else rng.randint(2, 9)
        rows.append({"input_ids": [r + 1] + [rng.randrange(3000, 9999) for _ in range(n - 1)]})
    data = os.path.join(OUT, "pack_groups.jsonl")
    with open(data, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    cases = {}
    for num_rows, num_proc in ((ROWS, None), (ROWS, 0), (ROWS, 2), (ROWS, 3), (6, 8)):
        with tempfile.TemporaryDirectory() as cache:  # no map result reused across num_proc
            ds = datasets.load_dataset("json", data_files=data, split="train", cache_dir=cache)
            ds = ds.select(range(num_rows))
            packed = du.pack_dataset(ds, MAX_LENGTH, "bfd", {"num_proc": num_proc})
            bins = []
            for ex in packed:
                starts, o = [], 0
                for n in ex["seq_lengths"]:
                    starts.append(ex["input_ids"][o] - 1)
                    o += n
                bins.append(starts)
        cases[f"{num_rows}:{'null' if num_proc is None else num_proc}"] = bins
    json.dump({"max_length": MAX_LENGTH, "cases": cases},
              open(os.path.join(OUT, "pack_groups.golden.json"), "w"), separators=(",", ":"))
    print({k: len(v) for k, v in cases.items()})


if __name__ == "__main__":
    main()
