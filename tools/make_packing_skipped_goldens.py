#!/usr/bin/env python3
"""Makes the goldens of rows zerotune skips before tokenising, as TRL 0.25.1 packs them
(tests/data/sft/skipped_<case>.jsonl and skipped_<case>.golden.json).

zerotune skips a row whose completion, text or messages is empty (SFT_SEMANTICS §1) before it
tokenises it. TRL 0.25.1's `SFTTrainer._prepare_dataset` skips nothing: `add_eos` appends the EOS
to an empty plain completion (or to an empty `text`), `tokenize_fn` tokenises the row and
`pack_dataset(..., "bfd")` packs it with the others, truncated to max_length (`_pack_bfd`'s
`pc.list_slice`). So with packing such a row takes tokens in TRL's bins, and zerotune gives it a
stand-in of that length (removed after packing). Some such rows TRL cannot tokenise:
  - `messages: []` (and ShareGPT `conversations: []`): `is_conversational` reads `messages[0]`,
    IndexError;
  - a conversational `completion: []`: `is_conversational` reads the key `{"prompt",
    "completion"}.pop()` gives, which depends on Python's string hash (random per process): on
    "completion" IndexError, on "prompt" TRL packs the prompt rendered alone (add_generation_prompt
    false). This script runs the second case (it re-executes itself under a PYTHONHASHSEED for
    which `is_conversational` reads "prompt", unless PYTHONHASHSEED is set) and records a seed of
    the first;
  - a row of no tokens (an empty text in a dataset_text_field other than "text", which gets no
    EOS): `_SegmentTree.search(0)` fails its `0 < val` assertion.
For the rows TRL fails on, the golden records TRL's error, and the bins TRL makes of the same file
without those rows (their row numbers kept), which is what zerotune must make.

Each golden also records the lengths transformers counts in its speed metrics ("trl_lengths",
packed and unpacked): `len(trainer.eval_dataset)` (Trainer.evaluation_loop's num_samples, by which
evaluate() rates eval_samples_per_second), `len(trainer.train_dataset)` and the num_train_samples
of `Trainer.set_initial_training_values` (train_samples_per_second; num_train_epochs 2.5), of a
trainer given the file as both its train and its eval set (eval_packing null: as packing). Where
TRL fails on the file, they are of the file without the rows it fails on ("trl_fails": true).
A row dropped for no target token after truncation (case "dropped_bins") is kept by TRL as any
row, and its bins can hold only such rows: they count in TRL's lengths, not in zerotune's samples.

Each case runs the real `trl.SFTTrainer` (a tiny random Qwen2 model on the CPU; the dataset loaded
by `datasets.load_dataset("json")` from the jsonl, as the users' script loads it) and reads back
`trainer.train_dataset`: per bin, the source rows, `seq_lengths` and the ids. A bin's examples are
matched to their rows by their ids (every row starts "Row <r>:", so they differ within max_length),
from the same trainer run unpacked with no max_length.

Run with TRL 0.25.1 (transformers 4.57, CPU torch):
    python tools/make_packing_skipped_goldens.py [--shared ../shared/data]
"""
import argparse
import contextlib
import io
import json
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "data", "sft")

# Whether `is_conversational` of a conversational prompt/completion row with an empty completion
# reads "prompt" under this process's string hash (exit 0) or fails (IndexError, exit 1).
PROBE = ("from trl.data_utils import is_conversational as c\n"
         "c({'prompt': [{'role': 'user', 'content': 'x'}], 'completion': []})")


def hash_seed(ok):
    """The first PYTHONHASHSEED under which PROBE succeeds (ok) or fails (not ok)."""
    for seed in range(64):
        env = dict(os.environ, PYTHONHASHSEED=str(seed))
        r = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True)
        if (r.returncode == 0) == ok:
            return seed
    raise RuntimeError("no PYTHONHASHSEED found")


if "PYTHONHASHSEED" not in os.environ:
    os.execve(sys.executable, [sys.executable] + sys.argv,
              dict(os.environ, PYTHONHASHSEED=str(hash_seed(True))))

import datasets  # noqa: E402
import trl  # noqa: E402
from make_sft_goldens import tiny_model  # noqa: E402  (tools/ is the script's folder)
from transformers import AutoTokenizer  # noqa: E402
from trl import SFTConfig, SFTTrainer  # noqa: E402

datasets.disable_progress_bars()
datasets.logging.set_verbosity_error()

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november "
         "oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()


def words(rng, lo, hi):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def trainer_of(tok, data_file, with_eval=False, **cfg):
    """TRL's SFTTrainer of `data_file` (also its eval set when `with_eval`) under SFTConfig(**cfg)."""
    ds = datasets.load_dataset("json", data_files=data_file, split="train",
                               cache_dir=tempfile.mkdtemp())
    args = SFTConfig(output_dir=tempfile.mkdtemp(), report_to=[], bf16=False, use_cpu=True, **cfg)
    with contextlib.redirect_stderr(io.StringIO()):  # TRL's mask-mismatch warnings
        return SFTTrainer(model=tiny_model(), args=args, train_dataset=ds,
                          eval_dataset=ds if with_eval else None, processing_class=tok)


def train_dataset(tok, data_file, **cfg):
    """TRL's train_dataset of `data_file` under SFTConfig(**cfg)."""
    return trainer_of(tok, data_file, **cfg).train_dataset


def trl_lengths(tok, data_file, **cfg):
    """{"eval_dataset": len(eval_dataset), "train_dataset": len(train_dataset),
    "num_train_samples": transformers' num_train_samples} of a trainer given `data_file` as both
    sets under SFTConfig(num_train_epochs=2.5, per_device_train_batch_size=2, **cfg)."""
    trainer = trainer_of(tok, data_file, with_eval=True, num_train_epochs=2.5,
                         per_device_train_batch_size=2, **cfg)
    args = trainer.args
    values = trainer.set_initial_training_values(args, trainer.get_train_dataloader(),
                                                 trainer.get_total_train_batch_size(args))
    return {"eval_dataset": len(trainer.eval_dataset), "train_dataset": len(trainer.train_dataset),
            "num_train_samples": values[3]}


def trl_bins(tok, data_file, rows_of, max_length, text_field, skipped, **cfg):
    """TRL's bins of `data_file`: [{"rows", "seq_lengths", "ids"}]; `rows_of` maps a file row to
    the row number it reports; rows of equal ids must be `skipped` ones."""
    unpacked = train_dataset(tok, data_file, max_length=None, dataset_text_field=text_field,
                             **cfg)
    row_of = {}  # ids -> rows (several only for skipped rows, which are all the same to zerotune)
    for r, ids in enumerate(unpacked["input_ids"]):
        row_of.setdefault(tuple(ids[:max_length]), []).append(rows_of[r])
    for key, rows in row_of.items():
        assert len(rows) == 1 or all(r in skipped for r in rows), f"rows {rows} begin alike"
    packed = train_dataset(tok, data_file, max_length=max_length, packing=True,
                           dataset_text_field=text_field, **cfg)
    bins = []
    for ex in packed:
        rows, o = [], 0
        for n in ex["seq_lengths"]:
            rows.append(row_of[tuple(ex["input_ids"][o:o + n])].pop(0))
            o += n
        assert o == len(ex["input_ids"])
        bins.append({"rows": rows, "seq_lengths": ex["seq_lengths"], "ids": ex["input_ids"]})
    return bins


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def cases():
    """name -> (rows, max_length, dataset_text_field, skipped rows, TRL fails on them, note)."""
    rng = random.Random(20261207)
    out = {}

    # Plain prompt/completion: empty completions at row 0, in the middle, one longer than max_length
    # (its stand-in truncated) and one whose prompt ends with the EOS (add_eos tests the
    # completion: it still gets one).
    rows, skipped = [], []
    for r in range(40):
        empty = r in (0, 7, 13, 22, 31)
        # Skipped rows of middle lengths: their stand-ins take bins kept rows would otherwise get.
        prompt = f"Row {r}: " + words(rng, 8 if empty else 2, 40 if r == 13 else 16 if empty else 8)
        prompt += "\nAnswer:"
        if r == 13:
            prompt += " " + words(rng, 40, 40)
        if r == 22:
            prompt += "<|im_end|>"
        rows.append({"prompt": prompt, "completion": "" if empty else " " + words(rng, 1, 8)})
        if empty:
            skipped.append(r)
    out["plain_pc"] = (rows, 48, "text", skipped, False,
                       "plain prompt/completion with empty completions (EOS appended by add_eos)")

    # Plain text: empty texts (tokenised as the EOS alone).
    rows, skipped = [], []
    for r in range(40):
        empty = r in (3, 4, 19, 39)
        rows.append({"text": "" if empty else f"Row {r}: " + words(rng, 2, 20)})
        if empty:
            skipped.append(r)
    out["text"] = (rows, 40, "text", skipped, False, "text rows with empty texts (the EOS alone)")

    # Conversational prompt/completion: empty completion lists (the prompt rendered alone).
    rows, skipped = [], []
    for r in range(30):
        empty = r in (5, 6, 17, 28)
        n_words = (60, 60) if r == 17 else (10, 24) if empty else (2, 10)
        prompt = [{"role": "user", "content": f"Row {r}: " + words(rng, *n_words)}]
        if r % 4 == 1:
            prompt.insert(0, {"role": "system", "content": "Be brief."})
        completion = [] if empty else [{"role": "assistant", "content": words(rng, 1, 8)}]
        rows.append({"prompt": prompt, "completion": completion})
        if empty:
            skipped.append(r)
    out["conv_pc"] = (rows, 96, "text", skipped, False,
                      "conversational prompt/completion with empty completion lists, under a "
                      "PYTHONHASHSEED where TRL's is_conversational reads 'prompt'")

    # Conversational language modelling: empty messages lists, which TRL fails on.
    rows, skipped = [], []
    for r in range(30):
        empty = r in (4, 11, 12)
        msgs = [] if empty else [
            {"role": "user", "content": f"Row {r}: " + words(rng, 2, 14)},
            {"role": "assistant", "content": words(rng, 1, 12)}]
        rows.append({"messages": msgs})
        if empty:
            skipped.append(r)
    out["messages"] = (rows, 96, "text", skipped, True, "messages rows with empty lists")

    # Plain text in a dataset_text_field other than "text" (no EOS): an empty one has no tokens.
    rows, skipped = [], []
    for r in range(30):
        empty = r in (2, 15)
        rows.append({"content": "" if empty else f"Row {r}: " + words(rng, 2, 20)})
        if empty:
            skipped.append(r)
    out["content_field"] = (rows, 40, "content", skipped, True,
                            "dataset_text_field 'content' with empty values (no tokens)")

    # Plain prompt/completion, dataset_num_proc 3 (map shards of rows 0-9, 10-19, 20-29): empty
    # completions and prompts longer than max_length (no target token after truncation, which TRL
    # keeps as any row), some filling a bin alone, and a shard of such rows only (rows 10-19).
    rows, skipped = [], []
    for r in range(30):
        empty = r in (3, 10, 12, 15, 17, 19, 25)
        long = r in (6, 11, 13, 14, 16, 18)
        n_words = (60, 70) if long or r in (3, 12) else (4, 10) if empty else (2, 6)
        prompt = f"Row {r}: " + words(rng, *n_words) + "\nAnswer:"
        rows.append({"prompt": prompt, "completion": "" if empty else " " + words(rng, 1, 4)})
        if empty or long:
            skipped.append(r)
    out["dropped_bins"] = (rows, 64, "text", skipped, False,
                           "plain prompt/completion with empty completions and rows of no target "
                           "token after truncation, bins of them alone, dataset_num_proc 3")
    return out


# SFTConfig values a case sets beyond max_length, packing and dataset_text_field.
CASE_CONFIG = {"dropped_bins": {"dataset_num_proc": 3}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(HERE, "..", "..", "shared", "data"))
    a = ap.parse_args()
    assert trl.__version__ == "0.25.1", trl.__version__
    tok = AutoTokenizer.from_pretrained(os.path.join(a.shared, "tokenizers", "qwen2.5-instruct"))
    for name, (rows, max_length, text_field, skipped, trl_fails, note) in cases().items():
        data = os.path.join(OUT, f"skipped_{name}.jsonl")
        write_jsonl(data, rows)
        cfg = CASE_CONFIG.get(name, {})
        g = {"case": name, "description": note, "trl": trl.__version__,
             "datasets": datasets.__version__, "python_hash_seed": int(os.environ["PYTHONHASHSEED"]),
             "max_length": max_length, "dataset_text_field": text_field, "rows": len(rows),
             "skipped": skipped, **cfg}
        if name == "conv_pc":
            g["trl_fails_under_python_hash_seed"] = hash_seed(False)
        if trl_fails:
            try:
                train_dataset(tok, data, max_length=max_length, packing=True,
                              dataset_text_field=text_field)
                raise AssertionError(f"{name}: TRL was expected to fail")
            except (IndexError, AssertionError) as e:
                if "expected to fail" in str(e):
                    raise
                g["trl_error"] = f"{type(e).__name__}: {e}"
        kept = [r for r in range(len(rows)) if r not in skipped]
        with tempfile.TemporaryDirectory() as d:
            less = os.path.join(d, f"skipped_{name}_less.jsonl")
            write_jsonl(less, [rows[r] for r in kept])
            if trl_fails:
                g["bins"] = trl_bins(tok, less, kept, max_length, text_field, skipped, **cfg)
            else:
                g["bins"] = trl_bins(tok, data, list(range(len(rows))), max_length, text_field,
                                     skipped, **cfg)
            g["trl_lengths"] = {}
            for mode, packing in (("packed", True), ("unpacked", False)):
                try:
                    n = trl_lengths(tok, data, max_length=max_length, packing=packing,
                                    dataset_text_field=text_field, **cfg)
                    n["trl_fails"] = False
                except (IndexError, AssertionError):
                    if not trl_fails:
                        raise
                    n = trl_lengths(tok, less, max_length=max_length, packing=packing,
                                    dataset_text_field=text_field, **cfg)
                    n["trl_fails"] = True
                g["trl_lengths"][mode] = n
        with open(os.path.join(OUT, f"skipped_{name}.golden.json"), "w", encoding="utf-8") as f:
            json.dump(g, f, separators=(",", ":"))
            f.write("\n")
        print(name, len(g["bins"]), "bins", g.get("trl_error", ""))


if __name__ == "__main__":
    main()
