#!/usr/bin/env python3
"""Makes the pre-tokenised dataset fixtures and goldens of zerotune's data layer (tests/data/pretok/).

TRL 0.25.1 trains a dataset with an `input_ids` column as it is ("processed": `is_processed =
"input_ids" in column_names` in `SFTTrainer._prepare_dataset` skips EOS and tokenisation), then
truncates or packs it, and its collator (`DataCollatorForLanguageModeling.torch_call`) builds the
labels: the `labels` column when the example has one, else `input_ids`; -100 at position 0 of each
sequence when padding-free (packing bfd); -100 where `completion_mask` is 0 when
`completion_only_loss` (unset: the first row has `prompt` and `completion`); -100 where
`assistant_masks` is 0 whenever that column exists.

No torch is needed: `SFTTrainer._prepare_dataset` and `get_dataset_column_names` are taken from the
installed trl's own sft_trainer.py (by `ast`, run unchanged), `remove_none_values` from its
trainer/utils.py, `truncate_dataset` / `pack_dataset` are trl.data_utils'; the dataset is loaded by
the real `datasets.load_dataset`. Only the collator's label rule (a few tensor lines) is written out
below, with the signature-column filter of `Trainer._remove_unused_columns`.

Run with trl 0.25.1 + datasets 4.x (e.g. the torch-free venv of /work/notes/attack32.md):
    python tools/make_pretok_goldens.py
Writes tests/data/pretok/{ids.jsonl,ids.parquet,masks.parquet,labels.jsonl,processed_pc.jsonl,
float_ids.parquet} and <case>.golden.json: per training sample, its ids, TRL's labels and (packed)
its seq_lengths.
"""
import ast
import contextlib
import inspect
import json
import logging
import os
import random
import textwrap
import types

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import trl
import trl.data_utils as du

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "data", "pretok")
VOCAB = 151665  # the Qwen2.5 tokenizer's ids (tests/data_layer use it): 0 … 151664
# Trainer._remove_unused_columns keeps SFTTrainer's signature columns (_set_signature_columns_if_needed).
SIGNATURE = ["input_ids", "labels", "seq_lengths", "completion_mask", "assistant_masks"]

datasets.disable_progress_bars()
datasets.logging.set_verbosity_error()


def trl_function(module_file, name, cls=None):
    """The source of a function (or a method of `cls`) of an installed trl module, dedented."""
    src = open(module_file, encoding="utf-8").read()
    tree = ast.parse(src)
    body = tree.body
    if cls is not None:
        body = next(n for n in body if isinstance(n, ast.ClassDef) and n.name == cls).body
    node = next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == name)
    return textwrap.dedent(ast.get_source_segment(src, node, padded=True))


def load_trl_prepare():
    trainer_dir = os.path.join(os.path.dirname(trl.__file__), "trainer")
    sft = os.path.join(trainer_dir, "sft_trainer.py")
    ns = {
        "Dataset": datasets.Dataset,
        "IterableDataset": datasets.IterableDataset,
        "PartialState": lambda: types.SimpleNamespace(main_process_first=contextlib.nullcontext),
        "logger": logging.getLogger("trl"),
        "pack_dataset": du.pack_dataset,
        "truncate_dataset": du.truncate_dataset,
        "is_conversational": du.is_conversational,
        "is_conversational_from_value": du.is_conversational_from_value,
        "maybe_convert_to_chatml": du.maybe_convert_to_chatml,
        "prepare_multimodal_messages": getattr(du, "prepare_multimodal_messages", None),
    }
    ns.update({k: getattr(__import__("typing"), k) for k in ("Callable", "Any")})
    ns.update({"PreTrainedTokenizerBase": object, "BaseImageProcessor": object,
               "FeatureExtractionMixin": object, "ProcessorMixin": object, "SFTConfig": object})
    from collections.abc import Mapping
    ns["Mapping"] = Mapping
    ns["TListOrMapping"] = object
    for src in (trl_function(os.path.join(trainer_dir, "utils.py"), "remove_none_values"),
                trl_function(sft, "get_dataset_column_names"),
                trl_function(sft, "_prepare_dataset", cls="SFTTrainer")):
        exec(compile(src, sft, "exec"), ns)
    return ns["_prepare_dataset"]


PREPARE = load_trl_prepare()


def trl_samples(data_file, completion_only_loss=None, max_length=1024, packing=False):
    """TRL 0.25.1's training samples of `data_file`: [{"ids", "labels"[, "seq_lengths"]}]."""
    fmt = {"jsonl": "json", "parquet": "parquet"}[data_file.rsplit(".", 1)[-1]]
    train = datasets.load_dataset(fmt, data_files=data_file, split="train")
    # SFTTrainer.__init__: completion_only_loss's default, padding_free
    sample = next(iter(train))
    col = ("prompt" in sample and "completion" in sample) if completion_only_loss is None \
        else completion_only_loss
    padding_free = packing  # packing_strategy bfd; padding_free unset
    args = types.SimpleNamespace(dataset_num_proc=None, max_length=max_length, packing_strategy="bfd",
                                 use_liger_kernel=False)
    self = types.SimpleNamespace(_is_vlm=False)
    ds = PREPARE(self, train, None, args, packing, None, "train")
    keep = [c for c in SIGNATURE if c in ds.column_names]  # Trainer._remove_unused_columns
    out = []
    for ex in ds:
        ex = {k: ex[k] for k in keep}
        ids = ex["input_ids"]
        labels = list(ex["labels"] if "labels" in ex else ids)  # torch_call
        if padding_free:
            pos = [p for n in ex["seq_lengths"] for p in range(n)] if "seq_lengths" in ex \
                else list(range(len(ids)))
            labels = [-100 if p == 0 else l for l, p in zip(labels, pos)]
        if col and "completion_mask" in ex:
            labels = [l if m != 0 else -100 for l, m in zip(labels, ex["completion_mask"])]
        if "assistant_masks" in ex:
            labels = [l if m != 0 else -100 for l, m in zip(labels, ex["assistant_masks"])]
        s = {"ids": ids, "labels": labels}
        if packing:
            s["seq_lengths"] = ex["seq_lengths"]
        out.append(s)
    return out


# ---------------------------------------------------------------- fixtures
def write_jsonl(name, rows):
    with open(os.path.join(OUT, name), "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def make_fixtures():
    rng = random.Random(20261207)
    ids = lambda n: [rng.randrange(VOCAB) for _ in range(n)]

    # ids only: lengths around max_length 16 (truncation) and for bfd bins of 16 / 24.
    rows = [{"input_ids": ids(n)} for n in (5, 20, 9, 16, 17, 3, 30, 7, 2, 12, 8, 4)]
    write_jsonl("ids.jsonl", rows)
    pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema([("input_ids", pa.list_(pa.int32()))])),
                   os.path.join(OUT, "ids.parquet"))

    # masks: completion_mask (int8), assistant_masks (bool), attention_mask with a 0, position_ids.
    rows = []
    for k, n in enumerate((6, 11, 4, 14, 9, 3, 10, 7)):
        split = 1 + k % (n - 1)
        cm = [0] * split + [1] * (n - split)
        am = [1 if (t + k) % 3 else 0 for t in range(n)]
        am[-1] = 1
        rows.append({"input_ids": ids(n), "completion_mask": cm, "assistant_masks": [bool(v) for v in am],
                     "attention_mask": [0 if (k == 2 and t == 0) else 1 for t in range(n)],
                     "position_ids": list(range(n))})
    schema = pa.schema([("input_ids", pa.list_(pa.int64())), ("completion_mask", pa.list_(pa.int8())),
                        ("assistant_masks", pa.list_(pa.bool_())), ("attention_mask", pa.list_(pa.int64())),
                        ("position_ids", pa.list_(pa.int64()))])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), os.path.join(OUT, "masks.parquet"),
                   row_group_size=3)

    # labels: a labels column (-100 or the id), a completion_mask, a pre-packed seq_lengths.
    rows = []
    for k, n in enumerate((7, 12, 5, 9, 15, 6)):
        x = ids(n)
        lab = [-100 if t < 1 + k % 4 else x[t] for t in range(n)]
        rows.append({"input_ids": x, "labels": lab, "completion_mask": [0, 0] + [1] * (n - 2),
                     "seq_lengths": [n - 3, 3]})
    write_jsonl("labels.jsonl", rows)

    # TRL-processed data saved with its text columns: prompt/completion beside input_ids and
    # completion_mask (datasets.map keeps the original columns). The ids are not those of the text.
    rows = []
    for k, n in enumerate((8, 5, 13, 6)):
        rows.append({"prompt": f"prompt {k}", "completion": f" completion {k}", "input_ids": ids(n),
                     "completion_mask": [0] * (2 + k) + [1] * (n - 2 - k)})
    write_jsonl("processed_pc.jsonl", rows)

    # Refused: float token ids from parquet.
    pq.write_table(pa.table({"input_ids": pa.array([[1.0, 2.0, 3.0], [4.0, 5.5]], pa.list_(pa.float64()))}),
                   os.path.join(OUT, "float_ids.parquet"))


CASES = [
    # name, data file, keyword arguments of trl_samples, description
    ("ids", "ids.jsonl", dict(max_length=16), "input_ids only, truncated to 16"),
    ("ids_nomax", "ids.parquet", dict(max_length=None), "input_ids only (parquet), no max_length"),
    ("ids_packed", "ids.jsonl", dict(max_length=24, packing=True), "input_ids only, bfd bins of 24"),
    ("masks_auto", "masks.parquet", dict(max_length=12),
     "completion_mask not applied (completion_only_loss unset, no prompt column), assistant_masks applied"),
    ("masks_col", "masks.parquet", dict(max_length=12, completion_only_loss=True),
     "completion_only_loss true: both masks applied"),
    ("masks_packed", "masks.parquet", dict(max_length=16, packing=True, completion_only_loss=True),
     "both masks, bfd bins of 16"),
    ("labels", "labels.jsonl", dict(max_length=10), "labels column used, completion_mask not applied"),
    ("labels_col", "labels.jsonl", dict(completion_only_loss=True), "labels column and completion_mask"),
    ("labels_packed", "labels.jsonl", dict(max_length=16, packing=True, completion_only_loss=True),
     "packing drops the labels column (and seq_lengths): labels from input_ids"),
    ("processed_pc", "processed_pc.jsonl", dict(max_length=10),
     "prompt/completion beside input_ids: completion_only_loss defaults on"),
]


def main():
    os.makedirs(OUT, exist_ok=True)
    make_fixtures()
    for name, data, kw, desc in CASES:
        samples = trl_samples(os.path.join(OUT, data), **kw)
        g = {"case": name, "description": desc, "dataset": data, "trl": trl.__version__,
             "datasets": datasets.__version__, "options": kw, "samples": samples}
        with open(os.path.join(OUT, name + ".golden.json"), "w", encoding="utf-8") as f:
            json.dump(g, f, separators=(",", ":"))
            f.write("\n")
        print(name, len(samples), "samples")


if __name__ == "__main__":
    main()
